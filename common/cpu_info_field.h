// Fields of /proc/cpuinfo ("model name", "flags"), for what the CPU plugin,
// the bench's machine record and the conformance runner read of the CPU.
#ifndef MIXRT_COMMON_CPU_INFO_FIELD_H_
#define MIXRT_COMMON_CPU_INFO_FIELD_H_

#include <set>
#include <string>

#include "absl/strings/string_view.h"

namespace mixrt {

// The value of /proc/cpuinfo's first "key : value" line with this key,
// whitespace stripped; "" when there is none or the file cannot be read.
std::string CpuInfoField(absl::string_view key);

// The words of the first "flags" line ("avx2", "avx512_bf16", "amx_tile":
// the instruction sets the kernel reports); empty when it cannot be read.
std::set<std::string> CpuFlags();

}  // namespace mixrt

#endif  // MIXRT_COMMON_CPU_INFO_FIELD_H_
