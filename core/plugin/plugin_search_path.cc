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
