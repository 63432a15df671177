// Whether a path may hold code this process runs, or data it trusts: who
// could have written it. Plugins (core/plugin) and the CPU plugin's cache
// of compiled loops (backends/cpu/fusion/loop_compiler.cc) apply these rules.
#ifndef MIXRT_COMMON_TRUSTED_PATH_H_
#define MIXRT_COMMON_TRUSTED_PATH_H_

#include <string>

namespace mixrt::files {

// Why `file` must not be loaded unless named explicitly: "" when it is
// trusted, else e.g. "directory /tmp is writable by its group or by every
// user". The rule is OpenSSH's StrictModes: with symlinks resolved first,
// the file and every directory from it up to / must be owned by root or by
// this user and writable by neither group nor others (sticky directories
// such as /tmp included: anyone may create files in them). Anyone who
// could write to one of them could have put code there.
std::string UntrustedReason(const std::string& file);

// Why `dir` is not a directory only this user can change: "" when it is.
// With symlinks resolved, `dir` must be owned by this user and writable by
// neither group nor others, and every directory above it owned by root or
// this user and writable by neither unless sticky (/tmp: others may create
// entries there but never rename or remove this one). What this process
// then writes into `dir` and reads back was written by this user.
std::string UnsafeDirectoryReason(const std::string& dir);

}  // namespace mixrt::files

#endif  // MIXRT_COMMON_TRUSTED_PATH_H_
