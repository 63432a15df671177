// The CPU plugin's cache of compiled loops, attacked as a hostile local
// user and a careless one would. Each case runs in a child process of its
// own (the loop cache and the compiler are found once per process):
//   - a cache directory another user made, or that others can write to,
//     is refused with the reason (loops run interpreted): another user
//     (uid 4242, acting through setpriv: CI runs as root) cannot get code
//     run in ours;
//   - a symlink, a truncated object or a flipped bit at an object's path
//     is rebuilt, never loaded (no SIGBUS, no planted code);
//   - a compiler that never finishes is killed after the time limit, and
//     CXX may carry arguments;
//   - without a cache directory nothing is left in TMPDIR after exit;
//   - the cache keeps its most recently used objects only.
#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "backends/cpu/fusion/fused_loop.h"
#include "backends/cpu/fusion/generated_loop.h"
#include "backends/cpu/fusion/loop_compiler.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "plugins/sdk/loop_codegen.h"
#include "tests/testing/fusion_graph_builder.h"

namespace mixrt::cpu {
namespace {

using ::testing::HasSubstr;

std::string Shell(const std::string& command) {
  std::string out;
  FILE* pipe = popen(("(" + command + ") 2>&1").c_str(), "r");
  char buf[4096];
  while (pipe != nullptr && fgets(buf, sizeof(buf), pipe) != nullptr)
    out += buf;
  if (pipe != nullptr) pclose(pipe);
  return out;
}

std::string FreshDir(const std::string& name) {
  const std::string dir =
      absl::StrCat(::testing::TempDir(), "/", name, "_", getpid());
  Shell(absl::StrCat("rm -rf '", dir, "' && mkdir -p '", dir,
                     "' && chmod 700 '", dir, "'"));
  return dir;
}

// This binary's child case `name` with `env`; its output.
std::string RunChild(const std::string& name, const std::string& env) {
  return Shell(absl::StrCat("env ", env, " MIXRT_LOOP_CACHE_CHILD=1 /proc/",
                            getpid(), "/exe --gtest_filter=LoopCacheChild.",
                            name));
}

// The description of a generated loop of `cols` columns (built now).
std::string BuildOne(int64_t cols) {
  testing::PointwiseChain c(3, cols);
  const std::vector<int> groups = ClaimFusedLoops(c.b.g);
  auto k = CompileGeneratedLoop(c.b.g, groups, 0);
  return k.ok() ? (*k)->Description() : std::string(k.status().message());
}

std::string ObjectPathOf(int64_t cols) {
  testing::PointwiseChain c(3, cols);
  const std::vector<int> groups = ClaimFusedLoops(c.b.g);
  auto source =
      sdk::GenerateLoopSource(c.b.g, groups, 0, {.host_reductions = true});
  return source.ok() ? CachedLoopPath(source->source, source->name) : "";
}

int CountObjects(const std::string& dir) {
  return std::stoi(Shell(
      absl::StrCat("ls '", dir, "' 2>/dev/null | grep -c '\\.so$' || true")));
}

// ---- Children: each prints what the parent checks. ----

bool Child() { return std::getenv("MIXRT_LOOP_CACHE_CHILD") != nullptr; }

TEST(LoopCacheChild, Build) {
  if (!Child()) GTEST_SKIP();
  std::printf("description: %s\n", BuildOne(41).c_str());
  std::printf("path: %s\n", ObjectPathOf(41).c_str());
}

TEST(LoopCacheChild, BuildMany) {
  if (!Child()) GTEST_SKIP();
  for (int64_t cols : {51, 52, 53, 54})
    std::printf("description: %s\n", BuildOne(cols).c_str());
}

TEST(LoopCacheChild, LoadCached) {
  if (!Child()) GTEST_SKIP();
  testing::PointwiseChain c(3, 41);
  const std::vector<int> groups = ClaimFusedLoops(c.b.g);
  auto source =
      sdk::GenerateLoopSource(c.b.g, groups, 0, {.host_reductions = true});
  ASSERT_TRUE(source.ok());
  std::printf("loaded: %d\n",
              LoadCachedLoop(source->source, source->name) != nullptr);
}

// ---- The cases ----

// Another user (made here) owns the cache directory, or can write to it:
// nothing is built into it or loaded from it.
TEST(LoopCache, ADirectoryAnotherUserCanWriteIsRefused) {
  if (Child()) GTEST_SKIP();
  const std::string dir = FreshDir("shared");
  // World-writable: anyone could plant an object for the next build's name.
  Shell(absl::StrCat("chmod 777 '", dir, "'"));
  std::string out = RunChild(
      "Build", absl::StrCat("MIXRT_CPU_CODEGEN=sync MIXRT_CACHE_DIR=", dir));
  EXPECT_THAT(
      out, HasSubstr("interpreted: the loop cache is not this user's alone"));
  EXPECT_THAT(out, HasSubstr("is writable by its group or by every user"));
  EXPECT_EQ(CountObjects(dir + "/cpu_loops"), 0);
  if (geteuid() != 0) {
    GTEST_SKIP() << "acting as another user needs root (CI runs as root)";
  }
  // Another user: a uid no one has (no account is needed to own files or
  // run as it).
  const int other = 4242;
  // A cache another user made: refused though only they can write to it.
  const std::string theirs = FreshDir("theirs");
  Shell(absl::StrCat("chmod 755 '", theirs, "' && mkdir -p '", theirs,
                     "/cpu_loops' && chown -R ", other, " '", theirs, "'"));
  out = RunChild(
      "Build", absl::StrCat("MIXRT_CPU_CODEGEN=sync MIXRT_CACHE_DIR=", theirs));
  EXPECT_THAT(
      out, HasSubstr("is owned by another user (uid " + std::to_string(other)));
  EXPECT_EQ(CountObjects(theirs + "/cpu_loops"), 0);
  // In a cache of ours, that user can plant nothing: cpu_loops/ is 0700.
  const std::string ours = FreshDir("ours");
  Shell(absl::StrCat("chmod 755 '", ours, "'"));
  out = RunChild("Build",
                 absl::StrCat("MIXRT_CPU_CODEGEN=sync MIXRT_CACHE_DIR=", ours));
  EXPECT_THAT(out, HasSubstr("(generated C++)"));
  const std::string attempt =
      Shell(absl::StrCat("setpriv --reuid=", other, " --regid=", other,
                         " --clear-groups sh -c 'echo planted > \"", ours,
                         "/cpu_loops/x.so\"' && echo WROTE"));
  EXPECT_THAT(attempt, ::testing::Not(HasSubstr("WROTE")));
  EXPECT_THAT(attempt, HasSubstr("Permission denied"));
}

TEST(LoopCache, SymlinksTruncationsAndFlippedBitsAreRebuiltNotLoaded) {
  if (Child()) GTEST_SKIP();
  const std::string dir = FreshDir("damaged");
  const std::string env =
      absl::StrCat("MIXRT_CPU_CODEGEN=sync MIXRT_CACHE_DIR=", dir);
  std::string out = RunChild("Build", env);
  ASSERT_THAT(out, HasSubstr("(generated C++)"));
  const std::string path = out.substr(
      out.find("path: ") + 6, out.find(".so\n") - out.find("path: ") - 3);
  EXPECT_THAT(RunChild("LoadCached", env), HasSubstr("loaded: 1"));
  // Truncated to half: refused before dlopen maps it (was SIGBUS).
  Shell(absl::StrCat("truncate -s $(( $(stat -c %s '", path, "') / 2 )) '",
                     path, "'"));
  out = RunChild("LoadCached", env);
  EXPECT_THAT(out, HasSubstr("loaded: 0"));
  EXPECT_THAT(out, HasSubstr("is rebuilt: its checksum does not match"));
  EXPECT_THAT(RunChild("Build", env), HasSubstr("(generated C++)"));
  EXPECT_THAT(RunChild("LoadCached", env), HasSubstr("loaded: 1"));
  // One bit flipped in the middle.
  Shell(
      absl::StrCat("python3 -c \"import sys; p=sys.argv[1]; "
                   "b=bytearray(open(p,'rb').read()); "
                   "b[len(b)//2]^=4; open(p,'wb').write(b)\" '",
                   path, "'"));
  out = RunChild("LoadCached", env);
  EXPECT_THAT(out, HasSubstr("loaded: 0"));
  EXPECT_THAT(out, HasSubstr("checksum does not match"));
  // A symlink to a good object elsewhere: not followed, replaced by a build.
  RunChild("Build", env);
  const std::string elsewhere = dir + "/elsewhere.so";
  Shell(absl::StrCat("mv '", path, "' '", elsewhere, "' && ln -s '", elsewhere,
                     "' '", path, "'"));
  EXPECT_THAT(RunChild("LoadCached", env), HasSubstr("loaded: 0"));
  struct stat st;
  ASSERT_NE(lstat(path.c_str(), &st), 0) << "the planted link is still there";
  EXPECT_EQ(lstat(elsewhere.c_str(), &st), 0)
      << "the link's target was touched";
}

TEST(LoopCache, AHangingCompilerIsKilledAndCxxMayHaveArguments) {
  if (Child()) GTEST_SKIP();
  const std::string dir = FreshDir("hang");
  const std::string slow = dir + "/slow_cxx";
  {
    std::ofstream script(slow);
    script << "#!/bin/sh\nif [ \"$1\" = --version ]; then echo slow 1.0; exit "
              "0; fi\n"
           << "echo $$ > " << dir << "/pid\nexec sleep 600\n";
  }
  chmod(slow.c_str(), 0755);
  const auto start = std::chrono::steady_clock::now();
  std::string out = RunChild(
      "Build",
      absl::StrCat("MIXRT_CPU_CODEGEN=sync MIXRT_CPU_CODEGEN_TIMEOUT_S=1 CXX=",
                   slow, " MIXRT_CACHE_DIR=", dir, "/cache"));
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(30));
  EXPECT_THAT(
      out,
      HasSubstr(
          "did not finish within 1 s (MIXRT_CPU_CODEGEN_TIMEOUT_S); killed"));
  EXPECT_THAT(out, HasSubstr("(interpreted:"));
  EXPECT_THAT(
      Shell(absl::StrCat("kill -0 $(cat '", dir, "/pid') && echo ALIVE")),
      ::testing::Not(HasSubstr("ALIVE")))
      << "the compiler lives on";
  // A compiler command with arguments of its own.
  out = RunChild(
      "Build",
      absl::StrCat("MIXRT_CPU_CODEGEN=sync 'CXX=c++ -O2' MIXRT_CACHE_DIR=", dir,
                   "/cache2"));
  EXPECT_THAT(out, HasSubstr("(generated C++)"));
}

TEST(LoopCache, WithoutACacheDirectoryNothingIsLeftBehind) {
  if (Child()) GTEST_SKIP();
  const std::string tmp = FreshDir("tmpdir");
  const std::string out = RunChild(
      "Build",
      absl::StrCat(
          "-u MIXRT_CACHE_DIR -u XDG_CACHE_HOME -u HOME MIXRT_CPU_CODEGEN=sync "
          "TMPDIR=",
          tmp));
  EXPECT_THAT(out, HasSubstr("(generated C++)"));
  EXPECT_EQ(Shell(absl::StrCat("ls -A '", tmp, "'")), "");
}

TEST(LoopCache, TheCacheKeepsItsMostRecentlyUsedObjects) {
  if (Child()) GTEST_SKIP();
  const std::string dir = FreshDir("lru");
  const std::string out = RunChild(
      "BuildMany",
      absl::StrCat("MIXRT_CPU_CODEGEN=sync MIXRT_CPU_LOOP_CACHE_MAX_OBJECTS=2 "
                   "MIXRT_CACHE_DIR=",
                   dir));
  EXPECT_THAT(out, HasSubstr("(generated C++)"));
  EXPECT_EQ(CountObjects(dir + "/cpu_loops"), 2);
}

}  // namespace
}  // namespace mixrt::cpu
