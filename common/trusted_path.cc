#include "common/trusted_path.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace mixrt::files {
namespace {

// "" when `st` (of `what` `path`) may hold what this user trusts: owned by
// root or this user (`owner_must_be_me`: by this user), and writable by
// neither group nor others (`sticky_ok`: unless sticky).
std::string OwnershipProblem(const struct stat& st, absl::string_view what,
                             const std::string& path, bool owner_must_be_me,
                             bool sticky_ok) {
  const bool mine = st.st_uid == ::geteuid();
  if (!mine && (owner_must_be_me || st.st_uid != 0)) {
    return absl::StrCat(what, " ", path, " is owned by another user (uid ",
                        st.st_uid, ")");
  }
  if ((st.st_mode & (S_IWGRP | S_IWOTH)) &&
      !(sticky_ok && (st.st_mode & S_ISVTX))) {
    return absl::StrCat(what, " ", path,
                        " is writable by its group or by every user");
  }
  return "";
}

// Checks `path` (resolved) and each directory above it; `first` describes
// the path itself, `parents_sticky_ok` the directories above.
std::string CheckUpward(const std::string& given, absl::string_view first,
                        bool first_owner_must_be_me, bool parents_sticky_ok) {
  char resolved[PATH_MAX];
  if (::realpath(given.c_str(), resolved) == nullptr) {
    return absl::StrCat(first, " ", given,
                        " cannot be resolved: ", std::strerror(errno));
  }
  std::string path = resolved;
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) {
    return absl::StrCat(first, " ", path, " cannot be inspected");
  }
  const std::string resolved_note =
      path == given ? "" : absl::StrCat(" (", given, " resolves to it)");
  std::string problem =
      OwnershipProblem(st, first, path, first_owner_must_be_me, false);
  if (!problem.empty()) return problem + resolved_note;
  while (path != "/") {
    const size_t slash = path.rfind('/');
    path = slash == 0 ? "/" : path.substr(0, slash);
    if (::stat(path.c_str(), &st) != 0) {
      return absl::StrCat("directory ", path, " cannot be inspected");
    }
    problem = OwnershipProblem(st, "directory", path, false, parents_sticky_ok);
    if (!problem.empty()) return problem + resolved_note;
  }
  return "";
}

}  // namespace

std::string UntrustedReason(const std::string& file) {
  return CheckUpward(file, "file", /*first_owner_must_be_me=*/false,
                     /*parents_sticky_ok=*/false);
}

std::string UnsafeDirectoryReason(const std::string& dir) {
  struct stat st;
  if (::stat(dir.c_str(), &st) == 0 && !S_ISDIR(st.st_mode)) {
    return absl::StrCat(dir, " is not a directory");
  }
  return CheckUpward(dir, "directory", /*first_owner_must_be_me=*/true,
                     /*parents_sticky_ok=*/true);
}

}  // namespace mixrt::files
