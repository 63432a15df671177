#include "common/cache_dir.h"

#include <cstdlib>

#include "gtest/gtest.h"

namespace mixrt::files {
namespace {

class CacheDir : public ::testing::Test {
 protected:
  void SetUp() override {
    unsetenv(kCacheDirEnv);
    unsetenv("XDG_CACHE_HOME");
    unsetenv("HOME");
  }
};

TEST_F(CacheDir, FollowsTheXdgOrder) {
  setenv("HOME", "/home/u", 1);
  EXPECT_EQ(MixrtCacheDir(), "/home/u/.cache/mixrt");
  setenv("XDG_CACHE_HOME", "/xdg", 1);
  EXPECT_EQ(MixrtCacheDir(), "/xdg/mixrt");
  setenv(kCacheDirEnv, "/mine", 1);
  EXPECT_EQ(MixrtCacheDir(), "/mine");
}

TEST_F(CacheDir, EmptyAndRelativeValuesAreIgnored) {
  setenv("HOME", "", 1);
  EXPECT_EQ(MixrtCacheDir(), "") << "HOME='' must not mean /";
  setenv("HOME", "/home/u", 1);
  setenv("XDG_CACHE_HOME", "relative/cache", 1);
  EXPECT_EQ(MixrtCacheDir(), "/home/u/.cache/mixrt");
  setenv(kCacheDirEnv, "", 1);
  EXPECT_EQ(MixrtCacheDir(), "/home/u/.cache/mixrt");
  setenv("HOME", "home", 1);
  unsetenv("XDG_CACHE_HOME");
  unsetenv(kCacheDirEnv);
  EXPECT_EQ(MixrtCacheDir(), "");
}

TEST_F(CacheDir, MakeCacheDirectoriesCreatesEveryLevel) {
  const std::string dir =
      std::string(std::getenv("TEST_TMPDIR")) + "/a/b/c/mixrt";
  EXPECT_TRUE(MakeCacheDirectories(dir));
  EXPECT_TRUE(MakeCacheDirectories(dir));  // Again: already there.
  EXPECT_FALSE(MakeCacheDirectories("/dev/null/x"));
}

}  // namespace
}  // namespace mixrt::files
