// Which plugin files are loaded unnamed (issue 16): OpenSSH StrictModes
// rules on the resolved file and every directory above it; truncated
// shared objects refused before dlopen; named paths that do not exist
// reported; a failed backend never passed over silently.
#include <elf.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "common/trusted_path.h"
#include "core/plugin/plugin_loader.h"
#include "core/plugin/plugin_search_path.h"
#include "core/plugin/registry.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/test_plugins.h"

namespace mixrt {
namespace {

using ::testing::HasSubstr;
using ::testing::IsEmpty;

std::string Dir(const std::string& path, mode_t mode) {
  ::mkdir(path.c_str(), 0700);
  ::chmod(path.c_str(), mode);
  return path;
}

std::string Root() {
  return Dir(std::string(getenv("TEST_TMPDIR")) + "/trust", 0755);
}

std::string CopyPlugin(const std::string& dir, size_t keep_bytes = 0) {
  const std::string to = dir + "/libmixrt_fixture_ok.so";
  std::ifstream in(testing::FixturePath("ok"), std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)),
                    std::istreambuf_iterator<char>());
  if (keep_bytes > 0) bytes.resize(keep_bytes);
  std::ofstream(to, std::ios::binary) << bytes;
  ::chmod(to.c_str(), 0755);
  return to;
}

// What LoadAll makes of `entry` in MIXRT_PLUGIN_PATH.
PluginReport Searched(const std::string& entry) {
  Registry registry;
  setenv(kPluginPathEnv, entry.c_str(), 1);
  registry.LoadAll();
  unsetenv(kPluginPathEnv);
  for (const PluginReport& r : registry.Reports()) {
    if (r.path.find("fixture_ok") != std::string::npos) return r;
  }
  return {};
}

TEST(PluginTrust, ASafeDirectoryIsTrusted) {
  ASSERT_THAT(files::UntrustedReason(Root()), IsEmpty())
      << "the test's own temporary directory must be trusted for the "
         "cases below to mean anything";
  const std::string safe = Dir(Root() + "/safe", 0755);
  const std::string plugin = CopyPlugin(safe);
  EXPECT_THAT(files::UntrustedReason(plugin), IsEmpty());
  EXPECT_EQ(Searched(safe).state, PluginState::kUsable);
}

TEST(PluginTrust, GroupWritableDirectoriesAreNot) {
  const std::string group = Dir(Root() + "/group", 0775);
  CopyPlugin(group);
  PluginReport r = Searched(group);
  EXPECT_EQ(r.state, PluginState::kUntrusted);
  EXPECT_THAT(r.reason,
              HasSubstr("directory " + group +
                        " is writable by its group or by every user"));
}

// A virtualenv under /tmp: a sticky directory is a safe ancestor of what
// this user owns and nobody else can write (others may create entries
// beside it, never rename or replace it), but no place for anything
// another user owns.
TEST(PluginTrust, AStickyDirectoryIsASafeAncestorOfWhatIsYours) {
  const std::string sticky = Dir(Root() + "/sticky", 01777);
  const std::string venv = Dir(sticky + "/venv", 0755);
  const std::string plugin = CopyPlugin(venv);
  EXPECT_THAT(files::UntrustedReason(plugin), IsEmpty());
  EXPECT_EQ(Searched(venv).state, PluginState::kUsable);
  EXPECT_EQ(Searched(CopyPlugin(sticky)).state, PluginState::kUsable);
  // Sticky but not writable by others only: the rule is the same.
  const std::string open_inside = Dir(sticky + "/open", 0777);
  CopyPlugin(open_inside);
  EXPECT_EQ(Searched(open_inside).state, PluginState::kUntrusted);
  // The sticky directory itself is no directory of the user's own.
  EXPECT_THAT(files::UnsafeDirectoryReason(sticky), HasSubstr("writable"));
}

// What another user can do in a sticky directory, tried as one (uid
// 65534): substitute neither the user's directory nor their library, and
// what they plant there (a directory, a symlink to the user's plugin) is
// refused as theirs.
TEST(PluginTrust, AnotherUserCannotSubstituteWhatIsYoursInAStickyDirectory) {
  if (::geteuid() != 0) GTEST_SKIP() << "acting as another user needs root";
  // Under /tmp: every user can reach it (the test's own directory is under
  // root's home, which uid 65534 could not even enter).
  char made[] = "/tmp/mixrt-sticky-XXXXXX";
  ASSERT_NE(::mkdtemp(made), nullptr);
  const std::string sticky = Dir(made, 01777);
  const std::string venv = Dir(sticky + "/venv", 0755);
  const std::string plugin = CopyPlugin(venv);
  const std::string loose = CopyPlugin(sticky);
  const std::string theirs_dir = sticky + "/theirs";
  const std::string theirs_link = sticky + "/libmixrt_link.so";
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    if (::setgid(65534) != 0 || ::setuid(65534) != 0) ::_exit(10);
    // Replacing the user's directory or library: EPERM (sticky), not
    // EACCES (unreachable), or the test would prove nothing.
    if (::rename(venv.c_str(), (sticky + "/moved").c_str()) == 0 ||
        errno != EPERM) {
      ::_exit(11);
    }
    if (::unlink(loose.c_str()) == 0 || errno != EPERM) ::_exit(12);
    if (::mkdir(venv.c_str(), 0755) == 0 || errno != EEXIST) ::_exit(13);
    // What they may do: create entries of their own.
    if (::mkdir(theirs_dir.c_str(), 0755) != 0) ::_exit(14);
    if (::symlink(plugin.c_str(), theirs_link.c_str()) != 0) ::_exit(15);
    ::_exit(0);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0)
      << "10: could not become uid 65534; 11-13: substituted or refused "
         "for the wrong reason; 14-15: could not create its own entries";
  EXPECT_THAT(files::UntrustedReason(plugin), IsEmpty());
  EXPECT_THAT(files::UntrustedReason(theirs_link),
              HasSubstr("symbolic link " + theirs_link +
                        " is owned by another user (uid 65534)"));
  CopyPlugin(theirs_dir);  // As root, into the other user's directory.
  PluginReport r = Searched(theirs_dir);
  EXPECT_EQ(r.state, PluginState::kUntrusted);
  EXPECT_THAT(r.reason, HasSubstr("owned by another user (uid 65534)"));
  EXPECT_EQ(std::system(("rm -rf " + sticky).c_str()), 0);
}

TEST(PluginTrust, AnUntrustedPluginIsSaidAtLoadWithTheFix) {
  const std::string open = Dir(Root() + "/open_said", 0777);
  const std::string plugin = CopyPlugin(open);
  Registry registry;
  setenv(kPluginPathEnv, open.c_str(), 1);
  ::testing::internal::CaptureStderr();
  registry.LoadAll();
  registry.LoadAll();  // Said once per plugin, not per search.
  const std::string said = ::testing::internal::GetCapturedStderr();
  unsetenv(kPluginPathEnv);
  EXPECT_THAT(said, HasSubstr("mixrt: warning: plugin " + plugin +
                              " (listed in MIXRT_PLUGIN_PATH) was not loaded: "
                              "directory " +
                              open + " is writable"));
  EXPECT_THAT(said, HasSubstr("not /tmp"));
  EXPECT_THAT(said, HasSubstr("--plugin=PATH"));
  EXPECT_EQ(said.find("warning"), said.rfind("warning")) << said;
  int untrusted = 0;
  for (const PluginReport& r : registry.Reports()) {
    untrusted += r.state == PluginState::kUntrusted;
  }
  EXPECT_EQ(untrusted, 1);
}

TEST(PluginTrust, ASafeDirectoryInsideAnOpenOneIsNot) {
  const std::string open = Dir(Root() + "/open", 0777);
  const std::string inner = Dir(open + "/inner", 0755);
  CopyPlugin(inner);
  PluginReport r = Searched(inner);
  EXPECT_EQ(r.state, PluginState::kUntrusted);
  EXPECT_THAT(r.reason, HasSubstr("directory " + open + " is writable"));
}

TEST(PluginTrust, SymlinksAreResolvedFirst) {
  const std::string open = Dir(Root() + "/open2", 0777);
  const std::string real = CopyPlugin(open);
  const std::string safe = Dir(Root() + "/safe_with_link", 0755);
  ASSERT_EQ(::symlink(real.c_str(), (safe + "/libmixrt_fixture_ok.so").c_str()),
            0);
  PluginReport r = Searched(safe);
  EXPECT_EQ(r.state, PluginState::kUntrusted);
  EXPECT_THAT(r.reason, HasSubstr(open));
}

TEST(PluginTrust, AFileEntryInThePluginPathIsCheckedToo) {
  const std::string open = Dir(Root() + "/open3", 0777);
  const std::string file = CopyPlugin(open);
  EXPECT_EQ(Searched(file).state, PluginState::kUntrusted);
  // Named with --plugin, it is the user's explicit choice.
  Registry named;
  named.LoadAll({file});
  EXPECT_TRUE(named.FindBackend("fixture_ok").ok());
}

TEST(PluginTrust, AWritableFileOrAnotherUsersDirectoryIsNot) {
  const std::string dir = Dir(Root() + "/writable_file", 0755);
  const std::string file = CopyPlugin(dir);
  ASSERT_EQ(::chmod(file.c_str(), 0775), 0);
  EXPECT_THAT(files::UntrustedReason(file), HasSubstr("file " + file));
  if (::geteuid() != 0) GTEST_SKIP() << "chown to another user needs root";
  const std::string theirs = Dir(Root() + "/theirs", 0755);
  CopyPlugin(theirs);
  if (::chown(theirs.c_str(), 65534, 65534) != 0) {
    GTEST_SKIP() << "cannot chown here: " << std::strerror(errno);
  }
  PluginReport r = Searched(theirs);
  EXPECT_EQ(r.state, PluginState::kUntrusted);
  EXPECT_THAT(r.reason, HasSubstr("is owned by another user (uid 65534)"));
}

TEST(PluginTrust, TruncatedSharedObjectsAreRefusedBeforeDlopen) {
  // dlopen of these used to kill the process with SIGBUS; this test runs
  // them in-process, so a regression crashes it. Cuts fall inside the
  // loaded segments (debug sections after them may be cut harmlessly).
  std::ifstream whole(testing::ReferencePluginPath(), std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(whole)),
                          std::istreambuf_iterator<char>());
  ASSERT_GE(bytes.size(), sizeof(Elf64_Ehdr));
  Elf64_Ehdr eh;
  std::memcpy(&eh, bytes.data(), sizeof(eh));
  uint64_t loaded_end = 0;
  for (int i = 0; i < eh.e_phnum; ++i) {
    Elf64_Phdr ph;
    std::memcpy(&ph, bytes.data() + eh.e_phoff + i * sizeof(ph), sizeof(ph));
    if (ph.p_type == PT_LOAD) {
      loaded_end = std::max<uint64_t>(loaded_end, ph.p_offset + ph.p_filesz);
    }
  }
  ASSERT_GT(loaded_end, 65536u);
  const std::string dir = Dir(Root() + "/truncated", 0755);
  for (uint64_t keep : {uint64_t{40}, uint64_t{4096}, uint64_t{65536},
                        loaded_end / 2, loaded_end - 1}) {
    const std::string path = absl::StrCat(dir, "/libmixrt_cut_", keep, ".so");
    std::ofstream(path, std::ios::binary) << bytes.substr(0, keep);
    absl::StatusOr<std::unique_ptr<Backend>> b = LoadPlugin(path);
    ASSERT_FALSE(b.ok()) << keep;
    EXPECT_THAT(b.status().message(), HasSubstr("refused before loading"));
    EXPECT_THAT(b.status().message(), HasSubstr("truncated")) << keep;
  }
}

TEST(PluginTrust, NamedPathsThatDoNotExistAreReported) {
  Registry registry;
  registry.LoadAll(
      {"/nonexistent/libmixrt_nothing.so", testing::ReferencePluginPath()});
  bool reported = false;
  for (const PluginReport& r : registry.Reports()) {
    if (r.path == "/nonexistent/libmixrt_nothing.so") {
      reported = true;
      EXPECT_EQ(r.state, PluginState::kNotFound);
      EXPECT_THAT(r.reason, HasSubstr("No such file or directory"));
    }
  }
  EXPECT_TRUE(reported);
  EXPECT_STREQ(PluginStateName(PluginState::kNotFound), "not found");
}

TEST(PluginTrust, PluginPathEntriesThatDoNotExistAreReportedOnce) {
  const char* old_env = std::getenv(kPluginPathEnv);
  const std::string saved = old_env != nullptr ? old_env : "";
  setenv(kPluginPathEnv, "/nonexistent/plugins:bazel-bin/nowhere", 1);
  Registry registry;
  registry.LoadAll({testing::ReferencePluginPath()});
  registry.LoadAll({testing::ReferencePluginPath()});
  int absolute = 0, relative = 0;
  for (const PluginReport& r : registry.Reports()) {
    if (r.path == "/nonexistent/plugins") {
      ++absolute;
      EXPECT_EQ(r.state, PluginState::kNotFound);
      EXPECT_THAT(r.reason, HasSubstr("No such file or directory (listed in "
                                      "MIXRT_PLUGIN_PATH)"));
    }
    if (r.path == "bazel-bin/nowhere") {
      // Not even searched: it would load code from the current directory.
      ++relative;
      EXPECT_EQ(r.state, PluginState::kUntrusted);
      EXPECT_THAT(r.reason,
                  HasSubstr("a relative path in MIXRT_PLUGIN_PATH would load "
                            "code from the current directory"));
    }
  }
  EXPECT_EQ(absolute, 1);
  EXPECT_EQ(relative, 1);
  if (old_env != nullptr) {
    setenv(kPluginPathEnv, saved.c_str(), 1);
  } else {
    unsetenv(kPluginPathEnv);
  }
}

TEST(PluginTrust, ABackendThatFailedIsNeverPassedOverSilently) {
  Registry registry;
  registry.LoadAll(
      {testing::FixturePath("init_fails"), testing::ReferencePluginPath()});
  ::testing::internal::CaptureStderr();
  absl::StatusOr<Device> device = registry.SelectDevice();
  registry.SelectDevice().IgnoreError();  // Warned once, not per call.
  const std::string err = ::testing::internal::GetCapturedStderr();
  ASSERT_TRUE(device.ok());
  EXPECT_EQ(device->backend()->name(), "reference");
  EXPECT_THAT(err, HasSubstr("libmixrt_fixture_init_fails.so was not used "
                             "(failed)"));
  EXPECT_THAT(err, HasSubstr("fixture driver 9.9 not found"));
  EXPECT_THAT(err, HasSubstr("selected backend 'reference' instead"));
  EXPECT_EQ(err.find("warning"), err.rfind("warning")) << err;
}

}  // namespace
}  // namespace mixrt
