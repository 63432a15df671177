#include "common/trusted_path.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"

namespace mixrt::files {
namespace {

// "" when `st` (of `what` `path`) may hold what this user trusts: owned by
// root or this user (`owner_must_be_me`: by this user), and writable by
// neither group nor others, unless it is a directory with the sticky bit
// (`sticky_ok`). A sticky directory owned by root or this user lets others
// create entries but never rename, remove or replace one they do not own:
// below it, an entry of this user's or root's that nobody else can write
// is safe (the kernel's protected_* rules reason the same way), and the
// entry itself is checked in its turn.
std::string OwnershipProblem(const struct stat& st, absl::string_view what,
                             const std::string& path, bool owner_must_be_me,
                             bool sticky_ok) {
  const bool mine = st.st_uid == ::geteuid();
  if (!mine && (owner_must_be_me || st.st_uid != 0)) {
    return absl::StrCat(what, " ", path, " is owned by another user (uid ",
                        st.st_uid, ")");
  }
  // A symbolic link's own mode is always 0777 and means nothing: whoever
  // may replace it is decided by the directory it is in.
  if (S_ISLNK(st.st_mode)) return "";
  if ((st.st_mode & (S_IWGRP | S_IWOTH)) &&
      !(sticky_ok && S_ISDIR(st.st_mode) && (st.st_mode & S_ISVTX))) {
    return absl::StrCat(what, " ", path,
                        " is writable by its group or by every user");
  }
  return "";
}

// `path` made absolute (from the current directory) with "." and ".."
// taken lexically; "" when the current directory is unknown.
std::string Lexical(const std::string& path) {
  std::string absolute = path;
  if (path.empty() || path[0] != '/') {
    char cwd[PATH_MAX];
    if (::getcwd(cwd, sizeof(cwd)) == nullptr) return "";
    absolute = absl::StrCat(cwd, "/", path);
  }
  std::vector<absl::string_view> parts;
  for (absl::string_view part : absl::StrSplit(absolute, '/')) {
    if (part.empty() || part == ".") continue;
    if (part == "..") {
      if (!parts.empty()) parts.pop_back();
      continue;
    }
    parts.push_back(part);
  }
  return absl::StrCat("/", absl::StrJoin(parts, "/"));
}

// Checks `path` and each directory above it, with `inspect` (stat, or
// lstat to see symlinks as the entries they are); `first` describes the
// path itself.
std::string CheckChain(std::string path,
                       int (*inspect)(const char*, struct stat*),
                       absl::string_view first, bool first_owner_must_be_me,
                       const std::string& note) {
  struct stat st;
  if (inspect(path.c_str(), &st) != 0) {
    return absl::StrCat(first, " ", path, " cannot be inspected");
  }
  std::string problem = OwnershipProblem(
      st, S_ISLNK(st.st_mode) ? absl::string_view("symbolic link") : first,
      path, first_owner_must_be_me, false);
  if (!problem.empty()) return problem + note;
  while (path != "/") {
    const size_t slash = path.rfind('/');
    path = slash == 0 ? "/" : path.substr(0, slash);
    if (inspect(path.c_str(), &st) != 0) {
      return absl::StrCat("directory ", path, " cannot be inspected");
    }
    problem = OwnershipProblem(
        st, S_ISLNK(st.st_mode) ? "symbolic link" : "directory", path, false,
        /*sticky_ok=*/true);
    if (!problem.empty()) return problem + note;
  }
  return "";
}

// Both the path as given (each symlink on it an entry that must be safe
// where it is) and the path it resolves to.
std::string CheckUpward(const std::string& given, absl::string_view first,
                        bool first_owner_must_be_me) {
  char resolved[PATH_MAX];
  if (::realpath(given.c_str(), resolved) == nullptr) {
    return absl::StrCat(first, " ", given,
                        " cannot be resolved: ", std::strerror(errno));
  }
  const std::string path = resolved;
  const std::string lexical = Lexical(given);
  if (!lexical.empty() && lexical != path) {
    // A link planted in a shared directory would be followed by the
    // resolution below to a file that passes.
    std::string problem =
        CheckChain(lexical, ::lstat, first, first_owner_must_be_me, "");
    if (!problem.empty()) return problem;
  }
  return CheckChain(
      path, ::stat, first, first_owner_must_be_me,
      path == given ? "" : absl::StrCat(" (", given, " resolves to it)"));
}

}  // namespace

std::string UntrustedReason(const std::string& file) {
  return CheckUpward(file, "file", /*first_owner_must_be_me=*/false);
}

std::string UnsafeDirectoryReason(const std::string& dir) {
  struct stat st;
  if (::stat(dir.c_str(), &st) == 0 && !S_ISDIR(st.st_mode)) {
    return absl::StrCat(dir, " is not a directory");
  }
  return CheckUpward(dir, "directory", /*first_owner_must_be_me=*/true);
}

}  // namespace mixrt::files
