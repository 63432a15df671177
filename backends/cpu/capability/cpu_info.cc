#include "backends/cpu/capability/cpu_info.h"

#include <omp.h>

#include "absl/strings/str_cat.h"
#include "backends/cpu/onednn/onednn_compat.h"
#include "common/cpu_info_field.h"
#include "oneapi/dnnl/dnnl.hpp"

namespace mixrt::cpu {

const CpuInfo& GetCpuInfo() {
  static const CpuInfo info = [] {
    CpuInfo i;
    i.model = CpuInfoField("model name");
    if (i.model.empty()) i.model = "unknown x86-64 CPU";
    i.flags = CpuInfoField("flags");
    i.threads = omp_get_max_threads();
    __builtin_cpu_init();
    i.has_build_isa = __builtin_cpu_supports("avx2") &&
                      __builtin_cpu_supports("fma") &&
                      __builtin_cpu_supports("f16c");
    i.avx512 = __builtin_cpu_supports("avx512f") &&
               __builtin_cpu_supports("avx512bw") &&
               __builtin_cpu_supports("avx512dq") &&
               __builtin_cpu_supports("avx512vl");
    i.avx512_bf16 = __builtin_cpu_supports("avx512bf16");
    i.avx512_fp16 = __builtin_cpu_supports("avx512fp16");
    i.amx = __builtin_cpu_supports("amx-bf16");
    const dnnl_version_t* v = dnnl_version();
    i.onednn_version = absl::StrCat(v->major, ".", v->minor, ".", v->patch);
    const dnnl::cpu_isa isa = dnnl::get_effective_cpu_isa();
    i.onednn_isa = IsaName(isa);
    // oneDNN's ISA values are cumulative bit masks (avx512_core_bf16
    // contains avx512_core's bits, avx2 does not).
    const auto core = static_cast<unsigned>(dnnl::cpu_isa::avx512_core);
    i.onednn_avx512 = (static_cast<unsigned>(isa) & core) == core;
    return i;
  }();
  return info;
}

}  // namespace mixrt::cpu
