#include "common/file_lock.h"

#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace mixrt::files {
namespace {

using ::testing::HasSubstr;

std::string Tmp(const std::string& name) {
  return std::string(std::getenv("TEST_TMPDIR")) + "/" + name;
}

TEST(FileLock, ASecondWriterIsRefusedUntilTheFirstReleases) {
  const std::string path = Tmp("run.ckpt");
  {
    absl::StatusOr<FileLock> first = FileLock::Acquire(path);
    ASSERT_TRUE(first.ok()) << first.status();
    absl::StatusOr<FileLock> second = FileLock::Acquire(path);
    ASSERT_FALSE(second.ok());
    EXPECT_THAT(second.status().message(),
                HasSubstr(absl::StrCat("another run (pid ", ::getpid(), ")")));
  }
  EXPECT_TRUE(FileLock::Acquire(path).ok()) << "not released";
}

TEST(FileLock, AnotherProcessHoldingItIsNamed) {
  const std::string path = Tmp("shared.ckpt");
  int to_parent[2], to_child[2];
  ASSERT_EQ(::pipe(to_parent), 0);
  ASSERT_EQ(::pipe(to_child), 0);
  const pid_t child = ::fork();
  if (child == 0) {
    absl::StatusOr<FileLock> lock = FileLock::Acquire(path);
    const char ok = lock.ok() ? '1' : '0';
    if (::write(to_parent[1], &ok, 1) != 1) ::_exit(1);
    char done;
    if (::read(to_child[0], &done, 1) != 1) ::_exit(1);
    ::_exit(0);
  }
  char ok = 0;
  ASSERT_EQ(::read(to_parent[0], &ok, 1), 1);
  ASSERT_EQ(ok, '1');
  absl::StatusOr<FileLock> mine = FileLock::Acquire(path);
  EXPECT_FALSE(mine.ok());
  EXPECT_THAT(mine.status().message(),
              HasSubstr(absl::StrCat("another run (pid ", child, ")")));
  ASSERT_EQ(::write(to_child[1], "x", 1), 1);
  ::waitpid(child, nullptr, 0);
  // The kernel releases a dead holder's lock.
  EXPECT_TRUE(FileLock::Acquire(path).ok());
}

TEST(FileLock, APlantedSymlinkAtTheLockPathIsNotFollowed) {
  const std::string path = Tmp("linked.ckpt");
  const std::string victim = Tmp("victim");
  {
    FILE* f = std::fopen(victim.c_str(), "w");
    std::fputs("keep", f);
    std::fclose(f);
  }
  ASSERT_EQ(::symlink(victim.c_str(), (path + ".lock").c_str()), 0);
  EXPECT_FALSE(FileLock::Acquire(path).ok());
  FILE* f = std::fopen(victim.c_str(), "r");
  char buf[8] = {0};
  ASSERT_NE(std::fgets(buf, sizeof(buf), f), nullptr);
  std::fclose(f);
  EXPECT_STREQ(buf, "keep");
}

}  // namespace
}  // namespace mixrt::files
