// Whether a path may hold code this process runs, or data it trusts: who
// could have written it. Plugins (core/plugin) and the CPU plugin's cache
// of compiled loops (backends/cpu/fusion/loop_compiler.cc) apply these rules.
#ifndef MIXRT_COMMON_TRUSTED_PATH_H_
#define MIXRT_COMMON_TRUSTED_PATH_H_

#include <string>

namespace mixrt::files {

// Why `file` must not be loaded unless named explicitly: "" when it is
// trusted, else e.g. "directory /srv/x is writable by its group or by every
// user". The rule is OpenSSH's StrictModes, with sticky directories as the
// kernel's protected_* rules see them: the file and every directory from it
// up to / must be owned by root or this user and writable by neither group
// nor others, except that a directory with the sticky bit (/tmp) may be
// writable by all: there others may create entries but never rename,
// remove or replace one of this user's or root's, and each entry below is
// held to the rule in its turn. Checked twice: on the path as given (a
// symlink on it is an entry like any other: its owner counts, so a link
// another user planted in /tmp is refused) and on the path it resolves to.
std::string UntrustedReason(const std::string& file);

// Why `dir` is not a directory only this user can change: "" when it is.
// As UntrustedReason, but `dir` itself must be this user's (not root's) and
// may not be sticky and writable by others. What this process then writes
// into `dir` and reads back was written by this user.
std::string UnsafeDirectoryReason(const std::string& dir);

}  // namespace mixrt::files

#endif  // MIXRT_COMMON_TRUSTED_PATH_H_
