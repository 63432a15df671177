// A shared object is checked before dlopen maps it: dlopen of a truncated
// file maps segments past its end, and the first touch of such a page kills
// the process with SIGBUS (a plugin cut short by a failed copy took down
// every program, not only the one listing plugins).
#ifndef MIXRT_CORE_PLUGIN_ELF_CHECK_H_
#define MIXRT_CORE_PLUGIN_ELF_CHECK_H_

#include <string>

#include "absl/status/status.h"

namespace mixrt {

// OK when `path` is a 64-bit little-endian ELF shared object for this
// machine whose program header table and every segment's file range lie
// inside the file; otherwise FailedPrecondition saying which check failed.
absl::Status CheckElfSharedObject(const std::string& path);

}  // namespace mixrt

#endif  // MIXRT_CORE_PLUGIN_ELF_CHECK_H_
