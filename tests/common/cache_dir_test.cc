#include "common/cache_dir.h"

#include <sys/stat.h>

#include <cstdlib>
#include <string>

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

// A home that exists (the test's temporary directory stands for one).
std::string Home() { return std::getenv("TEST_TMPDIR"); }

TEST_F(CacheDir, FollowsTheXdgOrder) {
  setenv("HOME", Home().c_str(), 1);
  EXPECT_EQ(MixrtCacheDir(), Home() + "/.cache/mixrt");
  setenv("XDG_CACHE_HOME", "/xdg", 1);
  EXPECT_EQ(MixrtCacheDir(), "/xdg/mixrt");
  setenv(kCacheDirEnv, "/mine", 1);
  EXPECT_EQ(MixrtCacheDir(), "/mine");
}

TEST_F(CacheDir, EmptyAndRelativeValuesAreIgnored) {
  setenv("HOME", "", 1);
  EXPECT_EQ(MixrtCacheDir(), "") << "HOME='' must not mean /";
  setenv("HOME", Home().c_str(), 1);
  setenv("XDG_CACHE_HOME", "relative/cache", 1);
  EXPECT_EQ(MixrtCacheDir(), Home() + "/.cache/mixrt");
  setenv(kCacheDirEnv, "", 1);
  EXPECT_EQ(MixrtCacheDir(), Home() + "/.cache/mixrt");
  setenv("HOME", "home", 1);
  unsetenv("XDG_CACHE_HOME");
  unsetenv(kCacheDirEnv);
  EXPECT_EQ(MixrtCacheDir(), "");
}

// HOME=/nonexistent/x (run as root) once made mixrt create that home:
// a home that does not exist gives no cache directory, and nothing is made.
TEST_F(CacheDir, AHomeThatDoesNotExistIsNeverCreated) {
  const std::string home = Home() + "/no_such_home/x";
  setenv("HOME", home.c_str(), 1);
  EXPECT_EQ(MixrtCacheDir(), "");
  struct stat st;
  EXPECT_NE(::stat((Home() + "/no_such_home").c_str(), &st), 0);
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
