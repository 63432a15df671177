// The compile cache: a dynamic size learned by one process (three traces,
// two of them compiles: the third only verifies)
// serves a second process after one trace; corrupt, truncated and foreign
// entries are ignored and written again; concurrent writers of one entry
// leave one of them whole; a directory that cannot be written keeps entries
// in memory with one warning.
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "core/autograd/grad_mode.h"
#include "core/compiler/artifact_cache.h"
#include "core/compiler/compile.h"
#include "core/functional/ops.h"
#include "core/plugin/registry.h"
#include "core/tensor/factories.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "mixrt/status_macros.h"
#include "tests/testing/test_plugins.h"

namespace mixrt {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

Device Cpu() { return testing::CpuDevice(); }

std::string FreshDir(const std::string& name) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  const std::string dir =
      absl::StrCat(tmp != nullptr ? tmp : "/tmp", "/", name, "_", getpid());
  std::error_code ignored;  // Absent is what we want.
  std::filesystem::remove_all(dir, ignored);
  return dir;
}

// A two-layer MLP whose batch size varies; weights fixed by a seed, so
// every process traces the same graph.
struct Net {
  Tensor w1, w2;
  explicit Net(const Device& d) {
    Generator g(5);
    w1 = *randn({48, 24}, DType::kF32, d, 0, 0.2, &g);
    w2 = *randn({8, 48}, DType::kF32, d, 0, 0.2, &g);
  }
  absl::StatusOr<std::vector<Tensor>> operator()(
      const std::vector<Tensor>& in) const {
    MIXRT_ASSIGN_OR_RETURN(Tensor h, linear(in[0], w1, Tensor()));
    MIXRT_ASSIGN_OR_RETURN(h, relu(h));
    MIXRT_ASSIGN_OR_RETURN(Tensor out, linear(h, w2, Tensor()));
    return std::vector<Tensor>{out};
  }
};

Tensor Batch(const Device& d, int64_t rows) {
  Generator g(static_cast<uint64_t>(rows));
  return *randn({rows, 24}, DType::kF32, d, 0, 1, &g);
}

// Calls a fresh compiled Net at each size, checking every result against
// eager bit for bit; returns how many traces it took and its Explain().
std::pair<int, std::string> CompileAndCall(const std::vector<int64_t>& sizes) {
  const Device d = Cpu();
  const Net net(d);
  auto f = compile(net);
  EXPECT_TRUE(f.ok());
  InferenceModeGuard inference;
  for (int64_t n : sizes) {
    const std::vector<Tensor> in = {Batch(d, n)};
    auto got = (*f)(in);
    auto want = net(in);
    EXPECT_TRUE(got.ok() && want.ok());
    if (got.ok() && want.ok()) {
      EXPECT_EQ(*(*got)[0].to_bytes(), *(*want)[0].to_bytes()) << "size " << n;
    }
  }
  return {f->compiles(), f->Explain()};
}

// Runs this test binary's child test in a new process with `env`; returns
// its stdout.
std::string RunChild(const std::string& env) {
  const std::string cmd =
      absl::StrCat(env, " MIXRT_CACHE_TEST_CHILD=1 /proc/", getpid(),
                   "/exe --gtest_filter=CompileCacheChild.* 2>&1");
  FILE* pipe = popen(cmd.c_str(), "r");
  std::string out;
  char buf[4096];
  while (pipe != nullptr && fgets(buf, sizeof(buf), pipe) != nullptr)
    out += buf;
  if (pipe != nullptr) pclose(pipe);
  return out;
}

// The child: a "second process" compiling Net and calling it at 8, 40, 64.
TEST(CompileCacheChild, CallsAtThreeSizes) {
  if (std::getenv("MIXRT_CACHE_TEST_CHILD") == nullptr) GTEST_SKIP();
  const auto [compiles, explain] = CompileAndCall({8, 40, 64});
  std::printf(
      "child compiles=%d loaded=%d\n", compiles,
      explain.find("loaded from the compile cache") != std::string::npos);
}

TEST(CompileCache, ASecondProcessTracesOnceWhereTheFirstLearnedADynamicSize) {
  const std::string dir = FreshDir("second_process");
  const std::string env = absl::StrCat("MIXRT_CACHE_DIR='", dir, "'");
  // The first process learns the batch dim (two sizes, then a third that
  // verifies the formulas without counting).
  EXPECT_THAT(RunChild(env), HasSubstr("child compiles=2 loaded=0"));
  // A second process: one trace that counts; new sizes are checked by
  // traces that do not.
  EXPECT_THAT(RunChild(env), HasSubstr("child compiles=1 loaded=1"));
  // With the cache off, it learns again.
  EXPECT_THAT(RunChild(env + " MIXRT_COMPILE_CACHE=0"),
              HasSubstr("child compiles=2 loaded=0"));
}

// The one entry file in `dir`/compile.
std::string EntryFile(const std::string& dir) {
  std::string path;
  FILE* ls = popen(absl::StrCat("ls '", dir, "/compile'").c_str(), "r");
  char buf[512];
  while (ls != nullptr && fgets(buf, sizeof(buf), ls) != nullptr) {
    std::string name = buf;
    if (!name.empty() && name.back() == '\n') name.pop_back();
    if (absl::EndsWith(name, ".entry"))
      path = absl::StrCat(dir, "/compile/", name);
  }
  if (ls != nullptr) pclose(ls);
  return path;
}

std::string Read(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

void Write(const std::string& path, const std::string& data) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << data;
}

TEST(CompileCache, CorruptTruncatedAndForeignEntriesAreIgnoredAndRewritten) {
  const std::string dir = FreshDir("damaged");
  setenv("MIXRT_CACHE_DIR", dir.c_str(), 1);
  compiler::ArtifactCache::ResetForTest();
  EXPECT_EQ(CompileAndCall({8, 16, 24}).first, 2);
  const std::string path = EntryFile(dir);
  ASSERT_FALSE(path.empty());
  const std::string good = Read(path);
  struct Damage {
    std::string name, content, reason;
  };
  std::string flipped = good;
  flipped[flipped.size() - 3] ^= 1;
  std::string foreign = good;
  // A whole, checksummed entry for another key (the first key byte).
  {
    const size_t body = foreign.find('\n', foreign.find('\n') + 1) + 1;
    foreign[body] = foreign[body] == 'x' ? 'y' : 'x';
    compiler::ArtifactCache other(FreshDir("foreign"));
    const std::string key = foreign.substr(
        body, std::stoul(foreign.substr(foreign.find('\n') + 1)));
    const std::string payload = good.substr(body + key.size());
    other.Store(key, payload);
    foreign = Read(other.PathFor(key));
  }
  for (const Damage& d :
       std::vector<Damage>{{"flipped bit", flipped, "checksum mismatch"},
                           {"truncated", good.substr(0, good.size() / 2),
                            "truncated or damaged"},
                           {"empty", "", "not a format"},
                           {"foreign", foreign, "written for another key"}}) {
    Write(path, d.content);
    compiler::ArtifactCache::ResetForTest();  // A new process.
    const auto [compiles, explain] = CompileAndCall({8, 16, 24, 40});
    EXPECT_EQ(compiles, 2) << d.name;
    EXPECT_THAT(explain, HasSubstr("compile cache entry ignored")) << d.name;
    EXPECT_THAT(explain, HasSubstr(d.reason)) << d.name;
    EXPECT_EQ(Read(path), good) << d.name << ": written again, whole";
  }
  compiler::ArtifactCache::ResetForTest();
  const auto [compiles, explain] = CompileAndCall({8, 40});
  EXPECT_EQ(compiles, 1);
  EXPECT_THAT(explain, HasSubstr("loaded from the compile cache"));
  unsetenv("MIXRT_CACHE_DIR");
  compiler::ArtifactCache::ResetForTest();
}

TEST(CompileCache, ConcurrentWritersOfOneEntryLeaveOneWhole) {
  const std::string dir = FreshDir("concurrent");
  const std::string key = "one key";
  std::vector<std::string> payloads;
  for (int i = 0; i < 4; ++i) payloads.push_back(std::string(1 << 20, 'a' + i));
  std::atomic<bool> torn{false};
  std::vector<std::thread> threads;
  for (int i = 0; i < 4; ++i) {
    threads.emplace_back([&, i] {
      compiler::ArtifactCache writer(dir);  // Each its own "process".
      for (int k = 0; k < 10; ++k) writer.Store(key, payloads[i]);
    });
    threads.emplace_back([&] {
      for (int k = 0; k < 20; ++k) {
        compiler::ArtifactCache reader(dir);
        std::string why;
        std::optional<std::string> got = reader.Load(key, &why);
        if (!why.empty()) torn = true;
        if (got && std::find(payloads.begin(), payloads.end(), *got) ==
                       payloads.end()) {
          torn = true;
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_FALSE(torn);
  compiler::ArtifactCache after(dir);
  std::string why;
  std::optional<std::string> last = after.Load(key, &why);
  ASSERT_TRUE(last.has_value()) << why;
  EXPECT_NE(std::find(payloads.begin(), payloads.end(), *last), payloads.end());
}

TEST(CompileCache, AnUnwritableDirectoryKeepsEntriesInMemoryWithOneWarning) {
  const std::string file = FreshDir("not_a_directory");
  Write(file, "a file where the cache directory would go");
  compiler::ArtifactCache cache(file + "/below");
  EXPECT_EQ(cache.directory(), "");
  EXPECT_THAT(cache.memory_only_reason(), HasSubstr("cannot create"));
  ::testing::internal::CaptureStderr();
  cache.Store("k1", "payload one");
  cache.Store("k2", "payload two");
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_THAT(err, HasSubstr("keeps entries in memory only: cannot create"));
  EXPECT_EQ(err.find("warning"), err.rfind("warning")) << err;  // Once.
  std::string why;
  EXPECT_EQ(cache.Load("k2", &why), "payload two");
  // A process whose cache is unwritable still compiles and runs.
  setenv("MIXRT_CACHE_DIR", (file + "/below").c_str(), 1);
  compiler::ArtifactCache::ResetForTest();
  ::testing::internal::CaptureStderr();
  EXPECT_EQ(CompileAndCall({8, 16, 24, 40}).first, 2);
  EXPECT_THAT(::testing::internal::GetCapturedStderr(),
              HasSubstr("memory only"));
  unsetenv("MIXRT_CACHE_DIR");
  compiler::ArtifactCache::ResetForTest();
}

}  // namespace
}  // namespace mixrt
