#include "core/plugin/plugin_search_path.h"

#include <dirent.h>
#include <dlfcn.h>
#include <sys/stat.h>

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace mixrt {

std::vector<std::string> ExpandPluginLocation(const std::string& location) {
  struct stat st;
  if (stat(location.c_str(), &st) != 0) return {};
  if (!S_ISDIR(st.st_mode)) return {location};
  std::vector<std::string> found;
  DIR* dir = opendir(location.c_str());
  if (dir == nullptr) return found;
  while (const dirent* entry = readdir(dir)) {
    const absl::string_view name = entry->d_name;
    if (absl::StartsWith(name, "libmixrt_") && absl::EndsWith(name, ".so")) {
      found.push_back(location + "/" + std::string(name));
    }
  }
  closedir(dir);
  std::sort(found.begin(), found.end());
  return found;
}

std::vector<std::string> SplitPluginPath(absl::string_view value) {
  return absl::StrSplit(value, ':', absl::SkipEmpty());
}

namespace {

// "" when `st` (of `what` `path`) may hold code we run unnamed.
std::string OwnershipProblem(const struct stat& st, absl::string_view what,
                             const std::string& path) {
  if (st.st_uid != 0 && st.st_uid != ::geteuid()) {
    return absl::StrCat(what, " ", path, " is owned by another user (uid ",
                        st.st_uid, ")");
  }
  if (st.st_mode & (S_IWGRP | S_IWOTH)) {
    return absl::StrCat(what, " ", path,
                        " is writable by its group or by every user");
  }
  return "";
}

}  // namespace

std::string UntrustedReason(const std::string& file) {
  char resolved[PATH_MAX];
  if (::realpath(file.c_str(), resolved) == nullptr) {
    return absl::StrCat("file ", file, " cannot be resolved: ",
                        std::strerror(errno));
  }
  std::string path = resolved;
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) {
    return absl::StrCat("file ", path, " cannot be inspected");
  }
  const std::string resolved_note =
      path == file ? "" : absl::StrCat(" (", file, " resolves to it)");
  std::string problem = OwnershipProblem(st, "file", path);
  if (!problem.empty()) return problem + resolved_note;
  while (path != "/") {
    const size_t slash = path.rfind('/');
    path = slash == 0 ? "/" : path.substr(0, slash);
    if (::stat(path.c_str(), &st) != 0) {
      return absl::StrCat("directory ", path, " cannot be inspected");
    }
    problem = OwnershipProblem(st, "directory", path);
    if (!problem.empty()) return problem + resolved_note;
  }
  return "";
}

std::string CoreObjectDirectory() {
  Dl_info info;
  if (dladdr(reinterpret_cast<const void*>(&CoreObjectDirectory), &info) == 0 ||
      info.dli_fname == nullptr) {
    return "";
  }
  std::string path = info.dli_fname;
  char resolved[PATH_MAX];
  if (realpath(path.c_str(), resolved) != nullptr) path = resolved;
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? "" : path.substr(0, slash);
}

}  // namespace mixrt
