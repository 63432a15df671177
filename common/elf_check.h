// A shared object is checked before dlopen maps it: dlopen of a truncated
// file maps segments past its end, and the first touch of such a page kills
// the process with SIGBUS (a plugin cut short by a failed copy took down
// every program, not only the one listing plugins; a truncated compiled
// loop in the CPU plugin's cache did the same).
#ifndef MIXRT_COMMON_ELF_CHECK_H_
#define MIXRT_COMMON_ELF_CHECK_H_

#include <string>

#include "absl/status/status.h"
#include "common/regular_file_read.h"

namespace mixrt::files {

// OK when `path` is a 64-bit little-endian ELF shared object for this
// machine whose program header table and every segment's file range lie
// inside the file; otherwise FailedPrecondition saying which check failed
// ("<what> <path> refused before loading: ...").
absl::Status CheckElfSharedObject(const std::string& path,
                                  const std::string& what = "plugin");
// The same check of a file already open (the file that will be loaded).
absl::Status CheckElfSharedObject(const RegularFile& file,
                                  const std::string& what = "plugin");

}  // namespace mixrt::files

#endif  // MIXRT_COMMON_ELF_CHECK_H_
