// An out-of-process plugin's processes end with its backend: whatever the
// plugin forks (a helper that keeps this process's stdout open, as
// `x=$(prog)` and subprocess.run(capture_output=True) wait on) dies when the
// backend is destroyed, when the plugin crashes, and when this process is
// killed; and the shared arena fits an address-space limit (ulimit -v).
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/clock.h"
#include "core/functional/ops.h"
#include "core/plugin/isolated_plugin.h"
#include "core/plugin/isolation/arena_size.h"
#include "core/plugin/registry.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/op_test_util.h"
#include "tests/testing/test_plugins.h"

extern char** environ;

namespace mixrt {
namespace {

using ::testing::HasSubstr;
using testing::MakeTensor;
using testing::RandomValues;

// The child of WhatThePluginForksDiesWhenThisProcessIsKilled.
constexpr char kChildEnv[] = "MIXRT_LIFETIME_TEST_CHILD";

void UseFaulty(const std::string& mode) {
  setenv(kPluginHostEnv,
         testing::RunfilePath("tools/plugin_host/mixrt-plugin-host").c_str(),
         1);
  setenv("MIXRT_FAULTY_MODE", mode.c_str(), 1);
  setenv("MIXRT_FAULTY_OP", "matmul", 1);
  setenv("MIXRT_FAULTY_AT", "1", 1);
}

const Backend* LoadFaulty(Registry& registry) {
  LoadOptions options;
  options.isolation = "faulty";
  absl::StatusOr<const Backend*> backend = registry.Load(
      testing::RunfilePath("tests/fixtures/hostile/libmixrt_faulty.so"),
      options);
  EXPECT_TRUE(backend.ok()) << backend.status();
  return backend.ok() ? *backend : nullptr;
}

absl::Status OneMatmul(const Backend* backend) {
  Tensor a = MakeTensor(Device(backend, 0), RandomValues(4 * 4, 7), {4, 4});
  return matmul(a, a).status();
}

// While alive, this process's stdout is a pipe's write end (so the plugin
// host and what it forks inherit it); closed() says whether every holder
// of that end is gone within `wait`.
class StdoutPipe {
 public:
  StdoutPipe() {
    EXPECT_EQ(pipe2(fds_, O_CLOEXEC), 0);
    fflush(stdout);
    saved_ = dup(1);
    dup2(fds_[1], 1);
  }
  // This process's stdout back; its own write end closed.
  void Restore() {
    if (saved_ < 0) return;
    fflush(stdout);
    dup2(saved_, 1);
    close(saved_);
    close(fds_[1]);
    saved_ = -1;
  }
  ~StdoutPipe() {
    Restore();
    close(fds_[0]);
  }
  bool ClosedWithin(absl::Duration wait) {
    const absl::Time end = absl::Now() + wait;
    char buffer[256];
    while (absl::Now() < end) {
      pollfd p{fds_[0], POLLIN, 0};
      if (poll(&p, 1, 100) <= 0) continue;
      const ssize_t n = read(fds_[0], buffer, sizeof(buffer));
      if (n == 0) return true;  // EOF: no writer is left.
    }
    return false;
  }

 private:
  int fds_[2] = {-1, -1};
  int saved_ = -1;
};

TEST(IsolatedPluginLifetime, WhatThePluginForksDiesWithTheBackend) {
  UseFaulty("fork");
  StdoutPipe out;
  {
    Registry registry;
    const Backend* backend = LoadFaulty(registry);
    ASSERT_NE(backend, nullptr);
    ASSERT_TRUE(OneMatmul(backend).ok());  // Forks the helper, then runs.
    out.Restore();
    EXPECT_FALSE(out.ClosedWithin(absl::Milliseconds(300)))
        << "the helper should be alive while the backend is";
  }
  EXPECT_TRUE(out.ClosedWithin(absl::Seconds(10)))
      << "a process the plugin forked still holds this process's stdout";
}

TEST(IsolatedPluginLifetime, WhatThePluginForksDiesWhenThePluginCrashes) {
  UseFaulty("fork_crash");
  StdoutPipe out;
  Registry registry;
  const Backend* backend = LoadFaulty(registry);
  ASSERT_NE(backend, nullptr);
  out.Restore();
  const absl::Status crashed = OneMatmul(backend);
  EXPECT_TRUE(absl::IsUnavailable(crashed)) << crashed;
  EXPECT_THAT(backend->failure(), HasSubstr("crashed: SIGSEGV"));
  // The registry, and with it the backend, still lives.
  EXPECT_TRUE(out.ClosedWithin(absl::Seconds(10)))
      << "a process the plugin forked outlived the plugin's crash";
}

// Run in a child of the test (this binary again, with kChildEnv set): loads
// the plugin, lets it fork, and dies by SIGKILL without any cleanup.
TEST(IsolatedPluginLifetime, ChildThatIsKilledWithItsPluginLoaded) {
  if (std::getenv(kChildEnv) == nullptr) GTEST_SKIP() << "a helper";
  UseFaulty("fork");
  Registry registry;
  const Backend* backend = LoadFaulty(registry);
  if (backend == nullptr || !OneMatmul(backend).ok()) _exit(3);
  kill(getpid(), SIGKILL);
}

TEST(IsolatedPluginLifetime, WhatThePluginForksDiesWhenThisProcessIsKilled) {
  char exe[4096];
  const ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
  ASSERT_GT(n, 0);
  exe[n] = '\0';
  setenv(kChildEnv, "1", 1);
  StdoutPipe out;
  std::string filter =
      "--gtest_filter=IsolatedPluginLifetime.ChildThatIsKilledWithItsPlugin"
      "Loaded";
  char* argv[] = {exe, filter.data(), nullptr};
  pid_t child = -1;
  ASSERT_EQ(posix_spawn(&child, exe, nullptr, nullptr, argv, environ), 0);
  unsetenv(kChildEnv);
  out.Restore();
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL)
      << "the child did not get as far as loading the plugin (status " << status
      << ")";
  EXPECT_TRUE(out.ClosedWithin(absl::Seconds(10)))
      << "the plugin host or what it forked outlived the killed process";
}

TEST(IsolatedPluginLifetime, TheArenaFitsAnAddressSpaceLimit) {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  GTEST_SKIP() << "a sanitizer's shadow memory needs address space no "
                  "limit leaves (the plugin host could not start)";
#endif
  UseFaulty("none");
  const isolation::AddressSpace space = isolation::CurrentAddressSpace();
  rlimit saved;
  ASSERT_EQ(getrlimit(RLIMIT_AS, &saved), 0);
  // Room for 2 GiB more than this process maps now: far less than the
  // machine's memory, which the arena used to take regardless.
  rlimit tight = saved;
  tight.rlim_cur = space.in_use_bytes + (uint64_t{2} << 30);
  if (saved.rlim_max != RLIM_INFINITY && saved.rlim_max < tight.rlim_cur) {
    GTEST_SKIP() << "the hard limit is already below the test's";
  }
  ASSERT_EQ(setrlimit(RLIMIT_AS, &tight), 0);
  {
    Registry registry;
    const Backend* backend = LoadFaulty(registry);
    EXPECT_NE(backend, nullptr);
    if (backend != nullptr) {
      const absl::Status ran = OneMatmul(backend);
      EXPECT_TRUE(ran.ok()) << ran;
    }
  }
  {
    // Asked for more than the limit leaves: an error naming the limit.
    Registry registry;
    LoadOptions options;
    options.isolation = "faulty";
    options.arena_bytes = uint64_t{64} << 30;
    absl::StatusOr<const Backend*> big = registry.Load(
        testing::RunfilePath("tests/fixtures/hostile/libmixrt_faulty.so"),
        options);
    EXPECT_FALSE(big.ok());
    EXPECT_THAT(big.status().message(), HasSubstr("RLIMIT_AS, ulimit -v"));
  }
  ASSERT_EQ(setrlimit(RLIMIT_AS, &saved), 0);
}

TEST(ArenaSize, DefaultsToTheMachineUnlessALimitLeavesLessRoom) {
  using isolation::AddressSpace;
  using isolation::ChooseArenaBytes;
  const uint64_t gib = uint64_t{1} << 30;
  AddressSpace unlimited{24 * gib, std::nullopt, 3 * gib};
  EXPECT_EQ(*ChooseArenaBytes(0, unlimited), 24 * gib);
  // ulimit -v 8000000 (KiB) with 3 GiB mapped: half the room that is left.
  AddressSpace limited{24 * gib, uint64_t{8000000} * 1024, 3 * gib};
  const absl::StatusOr<uint64_t> bytes = ChooseArenaBytes(0, limited);
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  EXPECT_EQ(*bytes,
            (uint64_t{8000000} * 1024 - 3 * gib) / 2 / (1 << 20) * (1 << 20));
  EXPECT_EQ(*ChooseArenaBytes(gib, limited), gib);  // As asked, it fits.
  const absl::StatusOr<uint64_t> too_big = ChooseArenaBytes(8 * gib, limited);
  EXPECT_TRUE(absl::IsResourceExhausted(too_big.status()));
  EXPECT_THAT(too_big.status().message(),
              HasSubstr("limit (RLIMIT_AS, ulimit -v) of 8192000000 bytes"));
  AddressSpace full{24 * gib, 3 * gib + (64 << 20), 3 * gib};
  const absl::StatusOr<uint64_t> none = ChooseArenaBytes(0, full);
  EXPECT_TRUE(absl::IsResourceExhausted(none.status()));
  EXPECT_THAT(none.status().message(), HasSubstr("MIXRT_PLUGIN_ARENA_BYTES"));
}

TEST(ArenaSize, SizesAreBytesOrBinaryUnits) {
  EXPECT_EQ(isolation::ParseByteSize("8G"), uint64_t{8} << 30);
  EXPECT_EQ(isolation::ParseByteSize("512m"), uint64_t{512} << 20);
  EXPECT_EQ(isolation::ParseByteSize("4096"), 4096u);
  EXPECT_EQ(isolation::ParseByteSize("0"), std::nullopt);
  EXPECT_EQ(isolation::ParseByteSize("-1G"), std::nullopt);
  EXPECT_EQ(isolation::ParseByteSize("eight"), std::nullopt);
  EXPECT_EQ(isolation::ParseByteSize("99999999999T"), std::nullopt);
  setenv(kPluginArenaEnv, "lots", 1);
  const absl::StatusOr<IsolationOptions> bad =
      IsolationOptionsFromEnvironment();
  unsetenv(kPluginArenaEnv);
  EXPECT_THAT(bad.status().message(), HasSubstr("MIXRT_PLUGIN_ARENA_BYTES"));
}

}  // namespace
}  // namespace mixrt
