#include "common/cache_dir.h"

#include <sys/stat.h>

#include <cstdlib>

#include "absl/strings/str_cat.h"

namespace mixrt::files {
namespace {

// The XDG rule: a relative path in these variables is invalid and ignored.
const char* AbsoluteEnv(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr && v[0] == '/' ? v : nullptr;
}

}  // namespace

std::string MixrtCacheDir() {
  if (const char* dir = AbsoluteEnv(kCacheDirEnv)) return dir;
  if (const char* xdg = AbsoluteEnv("XDG_CACHE_HOME")) {
    return absl::StrCat(xdg, "/mixrt");
  }
  if (const char* home = AbsoluteEnv("HOME")) {
    struct stat st;
    if (::stat(home, &st) == 0 && S_ISDIR(st.st_mode)) {
      return absl::StrCat(home, "/.cache/mixrt");
    }
  }
  return "";
}

bool MakeCacheDirectories(const std::string& dir) {
  for (size_t at = 1; at <= dir.size(); ++at) {
    if (at == dir.size() || dir[at] == '/') {
      ::mkdir(dir.substr(0, at).c_str(), 0700);  // EEXIST is fine.
    }
  }
  struct stat st;
  return ::stat(dir.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

}  // namespace mixrt::files
