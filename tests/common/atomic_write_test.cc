#include "common/atomic_write.h"

#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace mixrt::files {
namespace {

using ::testing::HasSubstr;

std::string TempDir(const std::string& name) {
  const std::string dir = absl::StrCat(std::getenv("TEST_TMPDIR"), "/", name);
  ::mkdir(dir.c_str(), 0700);
  return dir;
}

std::string Contents(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

void Write(const std::string& path, const std::string& text) {
  std::ofstream(path) << text;
}

// A pid that surely does not run: a child that has exited and been reaped.
pid_t DeadPid() {
  const pid_t child = ::fork();
  if (child == 0) ::_exit(0);
  ::waitpid(child, nullptr, 0);
  return child;
}

TEST(AtomicWrite, ReplacesARegularFileAndKeepsNoTemporary) {
  const std::string dir = TempDir("replace");
  const std::string path = dir + "/ckpt";
  Write(path, "old");
  const mode_t old_mask = ::umask(022);
  ASSERT_TRUE(WriteFileAtomically(path, "new").ok());
  EXPECT_EQ(Contents(path), "new");
  struct stat st;
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0644u) << std::oct << st.st_mode;
  // The umask is honoured (the temporary is created 0600, then chmod-ed).
  ::umask(077);
  ASSERT_TRUE(WriteFileAtomically(path, "newer").ok());
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u) << std::oct << st.st_mode;
  ::umask(old_mask);
  EXPECT_EQ(RemoveStaleTemporaries(path), 0);
}

TEST(AtomicWrite, PlantedSymlinksAtTemporaryNamesAreNeverFollowed) {
  // The attack: links for every candidate temporary name of this pid,
  // pointing at a file the writer must not touch.
  const std::string dir = TempDir("planted");
  const std::string path = dir + "/run.ckpt";
  const std::string victim = dir + "/victim";
  Write(victim, "precious");
  for (int n = 0; n < 8; ++n) {
    const std::string link = absl::StrCat(path, ".tmp.", ::getpid(), ".", n);
    ASSERT_EQ(::symlink(victim.c_str(), link.c_str()), 0);
  }
  ASSERT_TRUE(WriteFileAtomically(path, "checkpoint").ok());
  EXPECT_EQ(Contents(victim), "precious");
  EXPECT_EQ(Contents(path), "checkpoint");
}

TEST(AtomicWrite, ASymlinkedPathWritesThroughToItsTarget) {
  const std::string dir = TempDir("through");
  const std::string target = dir + "/real.ckpt";
  const std::string link = dir + "/latest.ckpt";
  Write(target, "old");
  ASSERT_EQ(::symlink(target.c_str(), link.c_str()), 0);
  ASSERT_TRUE(WriteFileAtomically(link, "new").ok());
  struct stat st;
  ASSERT_EQ(::lstat(link.c_str(), &st), 0);
  EXPECT_TRUE(S_ISLNK(st.st_mode)) << "the link was replaced by a file";
  EXPECT_EQ(Contents(target), "new");
}

// The README's /tmp/run.ckpt attack: another user plants run.ckpt -> a
// file only we may write, in a directory everyone can write to (sticky, as
// /tmp). The checkpoint must not replace the link's target, whatever
// fs.protected_symlinks says; a link of ours there is refused too (anyone
// could have made a link there), and one in a directory of ours is not.
TEST(AtomicWrite, ALinkAnotherUserCouldHavePlantedIsNotWrittenThrough) {
  const std::string shared = TempDir("shared_tmp");
  ASSERT_EQ(::chmod(shared.c_str(), 01777), 0);
  const std::string victim = TempDir("private") + "/root_only";
  Write(victim, "precious");
  const std::string link = shared + "/run.ckpt";
  ASSERT_EQ(::symlink(victim.c_str(), link.c_str()), 0);
  absl::Status s = WriteFileAtomically(link, "checkpoint");
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_THAT(s.message(),
              HasSubstr("which its group or every user can write to"));
  EXPECT_THAT(s.message(), HasSubstr("protected_symlinks"));
  EXPECT_EQ(Contents(victim), "precious");
  if (::geteuid() == 0) {
    // Owned by another user (uid 4242), even in a directory of ours.
    const std::string mine = TempDir("mine");
    const std::string theirs = mine + "/latest.ckpt";
    ASSERT_EQ(::symlink(victim.c_str(), theirs.c_str()), 0);
    ASSERT_EQ(::lchown(theirs.c_str(), 4242, 4242), 0)
        << "needs uids beyond ours (no sandbox)";
    s = WriteFileAtomically(theirs, "checkpoint");
    EXPECT_THAT(s.message(),
                HasSubstr("it is owned by another user (uid 4242)"));
    EXPECT_EQ(Contents(victim), "precious");
  }
}

TEST(AtomicWrite, RefusesTargetsThatAreNotRegularFiles) {
  const std::string dir = TempDir("special");
  const std::string fifo = dir + "/fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  absl::Status s = WriteFileAtomically(fifo, "x");
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(s.message(), HasSubstr("it is a FIFO"));
  struct stat st;
  ASSERT_EQ(::stat(fifo.c_str(), &st), 0);
  EXPECT_TRUE(S_ISFIFO(st.st_mode));

  s = WriteFileAtomically(dir, "x");
  EXPECT_THAT(s.message(), HasSubstr("it is a directory"));
  // As root, rename() over /dev/null would replace the device node.
  s = WriteFileAtomically("/dev/null", "x");
  EXPECT_THAT(s.message(), HasSubstr("it is a character device"));
  ASSERT_EQ(::stat("/dev/null", &st), 0);
  EXPECT_TRUE(S_ISCHR(st.st_mode));

  const std::string dangling = dir + "/dangling";
  ASSERT_EQ(::symlink((dir + "/missing/x").c_str(), dangling.c_str()), 0);
  s = WriteFileAtomically(dangling, "x");
  EXPECT_THAT(s.message(),
              HasSubstr("symlink whose target cannot be resolved"));
}

TEST(AtomicWrite, AFailedVerificationLeavesTheOldFile) {
  const std::string dir = TempDir("verify");
  const std::string path = dir + "/ckpt";
  Write(path, "good");
  std::string seen;
  absl::Status s =
      WriteFileAtomically(path, "bad", 0644, [&](const std::string& tmp) {
        seen = Contents(tmp);
        return absl::DataLossError("does not parse");
      });
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(seen, "bad");  // The check saw the written bytes.
  EXPECT_EQ(Contents(path), "good");
  EXPECT_EQ(RemoveStaleTemporaries(path), 0);  // Removed at once.
}

TEST(AtomicWrite, StaleTemporariesOfDeadWritersAreRemovedOnTheNextSave) {
  const std::string dir = TempDir("stale");
  const std::string path = dir + "/ckpt";
  const std::string dead = absl::StrCat(path, ".tmp.", DeadPid(), ".0");
  const std::string old_format = absl::StrCat(path, ".tmp.", DeadPid());
  const std::string alive = absl::StrCat(path, ".tmp.", ::getppid(), ".0");
  const std::string other = dir + "/other.tmp.1";
  for (const std::string& f : {dead, old_format, alive, other}) Write(f, "x");
  ASSERT_TRUE(WriteFileAtomically(path, "data").ok());
  EXPECT_NE(::access(dead.c_str(), F_OK), 0);
  EXPECT_NE(::access(old_format.c_str(), F_OK), 0);
  EXPECT_EQ(::access(alive.c_str(), F_OK), 0) << "a live writer's file";
  EXPECT_EQ(::access(other.c_str(), F_OK), 0) << "another file's name";
}

TEST(AtomicWrite, CheckCanCreateNamesWhatIsWrong) {
  const std::string dir = TempDir("can_create");
  EXPECT_TRUE(CheckCanCreate(dir + "/new.ckpt").ok());
  absl::Status s = CheckCanCreate(dir + "/missing/new.ckpt");
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(s.message(), HasSubstr("missing"));
  Write(dir + "/file", "x");
  s = CheckCanCreate(dir + "/file/new.ckpt");
  EXPECT_FALSE(s.ok());
  EXPECT_THAT(s.message(), HasSubstr(dir + "/file"));
  if (::geteuid() != 0) {  // Root may write anywhere.
    const std::string ro = TempDir("read_only");
    ASSERT_EQ(::chmod(ro.c_str(), 0500), 0);
    s = CheckCanCreate(ro + "/new.ckpt");
    EXPECT_EQ(s.code(), absl::StatusCode::kPermissionDenied);
  }
}

}  // namespace
}  // namespace mixrt::files
