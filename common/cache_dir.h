// The user's mixrt cache directory, by the XDG Base Directory rule: only
// absolute, non-empty values count, so HOME='' or a relative XDG_CACHE_HOME
// never puts the cache under / or the current directory.
//   $MIXRT_CACHE_DIR, else $XDG_CACHE_HOME/mixrt, else $HOME/.cache/mixrt
//   (only when $HOME is an existing directory: mixrt never creates a home,
//   which HOME=/nonexistent/x run as root once did).
#ifndef MIXRT_COMMON_CACHE_DIR_H_
#define MIXRT_COMMON_CACHE_DIR_H_

#include <string>

namespace mixrt::files {

inline constexpr char kCacheDirEnv[] = "MIXRT_CACHE_DIR";

// "" when no usable location is set (the caller then keeps nothing on disk).
std::string MixrtCacheDir();

// mkdir -p, creating missing directories with mode 0700 (the XDG rule for
// a cache directory that does not exist yet). False when `dir` is not a
// directory afterwards.
bool MakeCacheDirectories(const std::string& dir);

}  // namespace mixrt::files

#endif  // MIXRT_COMMON_CACHE_DIR_H_
