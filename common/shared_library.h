// The one way mixrt loads a shared library it was not linked against
// (plugins, in process and in mixrt-plugin-host; the CPU plugin's oneDNN 3.x
// companion; the collectives library): the file checked is the file loaded.
//
//  1. The path must name a file (a bare "libx.so" would be searched for in
//     LD_LIBRARY_PATH and the system's directories, not where it was
//     checked); a relative one is taken from the current directory.
//  2. With `trusted_location`, the path as given and the path it resolves
//     to pass UntrustedReason (trusted_path.h): only root or this user
//     could have written the file or anything on the way to it.
//  3. The resolved path is opened once, without following a link
//     (O_NOFOLLOW: one swapped in since is refused) and non-blocking (a
//     FIFO is refused, never waited on), and the open file is checked: a
//     regular file, a 64-bit ELF shared object for this machine whose
//     segments lie inside it (elf_check.h).
//  4. dlopen maps that descriptor through /proc/self/fd/N, so nothing put
//     at the path after the check runs. One exception: a library that
//     finds its dependencies through $ORIGIN (a Bazel-built plugin beside
//     its _solib, the oneDNN 3.x companion) is opened by its resolved path,
//     since its origin would otherwise be /proc/self/fd; the file there is
//     the one checked unless root, this user or, where the user named an
//     untrusted location, whoever can write there replaced it since.
#ifndef MIXRT_COMMON_SHARED_LIBRARY_H_
#define MIXRT_COMMON_SHARED_LIBRARY_H_

#include <string>

#include "absl/status/statusor.h"

namespace mixrt::files {

struct SharedLibraryOptions {
  // Names the library in errors: "plugin", "oneDNN 3.x companion".
  std::string what = "plugin";
  // Whether the file and its directories must pass UntrustedReason (false
  // only for a file the user named on the command line, their explicit
  // choice).
  bool trusted_location = true;
  // dlopen's flags.
  int flags = 0;  // 0: RTLD_NOW | RTLD_LOCAL.
};

// The dlopen handle of the library at `path`, or why not:
// FailedPrecondition naming the check that failed (NotFound when nothing
// is at `path`).
absl::StatusOr<void*> LoadSharedLibrary(const std::string& path,
                                        const SharedLibraryOptions& options);

}  // namespace mixrt::files

#endif  // MIXRT_COMMON_SHARED_LIBRARY_H_
