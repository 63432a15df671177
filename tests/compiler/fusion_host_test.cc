// The host side of backend fusion (core/compiler/fusion.cc) against a
// plugin that claims greedily (tests/fixtures/fake_accelerator_plugin.cc
// with MIXRT_FAKE_FUSION=greedy: every elementwise node as one group, run
// node by node): a group that cannot run in one place is refused with its
// reason, one that can runs where its inputs are ready, and either way the
// compiled results are eager's bit for bit (both run the reference kernels).
#include <cstdlib>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "core/compiler/artifact_cache.h"
#include "core/compiler/compile.h"
#include "core/functional/ops.h"
#include "core/plugin/isolated_plugin.h"
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

class FusionHost : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(setenv("MIXRT_FAKE_FUSION", "greedy", 1), 0);
    Load();
  }
  // The fake accelerator reads its MIXRT_FAKE_* settings when asked; out of
  // process it sees the environment it started with, so a test that
  // changes them starts another plugin process.
  void PluginEnvironmentChanged() {
    if (std::getenv("FUSION_HOST_TEST_OUT_OF_PROCESS") == nullptr) return;
    old_registries_.push_back(std::move(registry_));
    registry_ = std::make_unique<Registry>();
    Load();
  }
  void Load() {
    LoadOptions options;
    if (std::getenv("FUSION_HOST_TEST_OUT_OF_PROCESS") != nullptr) {
      // The plugin in mixrt-plugin-host (isolated_plugin.h).
      ASSERT_EQ(
          setenv(kPluginHostEnv,
                 testing::RunfilePath("tools/plugin_host/mixrt-plugin-host")
                     .c_str(),
                 1),
          0);
      options.isolation = "all";
    }
    auto backend = registry_->Load(
        testing::RunfilePath("tests/fixtures/libmixrt_fake_accelerator.so"),
        options);
    ASSERT_TRUE(backend.ok()) << backend.status();
    device_ = Device(*backend, 0);
  }
  void TearDown() override {
    unsetenv("MIXRT_FAKE_FUSION");
    unsetenv("MIXRT_FAKE_FUSION_SCRATCH");
  }

  Tensor Random(std::vector<int64_t> shape, uint64_t seed) {
    Generator g(seed);
    return *randn(shape, DType::kF32, device_, 0, 1, &g);
  }

  // Compiled (second call: a replay) against eager, bit for bit.
  std::string CompareWithEager(compiler::TracedFunction fn,
                               const std::vector<Tensor>& in,
                               const char* mode) {
    auto want = fn(in);
    EXPECT_TRUE(want.ok()) << want.status();
    auto f = compile(fn, {.mode = mode});
    EXPECT_TRUE(f.ok()) << f.status();
    if (!want.ok() || !f.ok()) return "";
    for (int call = 0; call < 2; ++call) {
      auto got = (*f)(in);
      EXPECT_TRUE(got.ok()) << got.status();
      if (!got.ok()) return "";
      for (size_t k = 0; k < got->size(); ++k) {
        EXPECT_EQ(*(*got)[k].to_bytes(), *(*want)[k].to_bytes())
            << mode << " output " << k;
      }
    }
    return f->Explain();
  }

  std::unique_ptr<Registry> registry_ = std::make_unique<Registry>();
  std::vector<std::unique_ptr<Registry>> old_registries_;
  Device device_;
};

// relu(x) feeds a matmul and, with the matmul's result, an add: a group of
// the relu, the add and the tanh would have to run both before and after
// the matmul. It splits where the path re-enters it: the relu alone (one
// node: op by op), the add and the tanh after the matmul, as one group.
TEST_F(FusionHost, AGroupANodeItLeftOutWouldSplitRunsInConvexPieces) {
  const std::vector<Tensor> in = {Random({8, 16}, 1), Random({16, 16}, 2)};
  auto fn =
      [](const std::vector<Tensor>& x) -> absl::StatusOr<std::vector<Tensor>> {
    MIXRT_ASSIGN_OR_RETURN(Tensor a, relu(x[0]));
    MIXRT_ASSIGN_OR_RETURN(Tensor m, matmul(a, x[1]));
    MIXRT_ASSIGN_OR_RETURN(Tensor c, add(a, m));
    MIXRT_ASSIGN_OR_RETURN(Tensor d, tanh(c));
    return std::vector<Tensor>{d};
  };
  for (const char* mode : {"default", "reduce-overhead"}) {
    const std::string explain = CompareWithEager(fn, in, mode);
    EXPECT_THAT(explain, Not(HasSubstr("refused"))) << explain;
    EXPECT_THAT(explain,
                HasSubstr("fusion: 1 fused kernels for 2 of 4 launches"))
        << explain;
    EXPECT_THAT(explain, ::testing::ContainsRegex("= relu\\(|= unary\\("))
        << explain;
  }
}

// neg(relu(x)) + y, then tanh: four elementwise launches, one group.
absl::StatusOr<std::vector<Tensor>> NegReluPlusYThenTanh(
    const std::vector<Tensor>& x) {
  MIXRT_ASSIGN_OR_RETURN(Tensor a, relu(x[0]));
  MIXRT_ASSIGN_OR_RETURN(a, neg(a));
  MIXRT_ASSIGN_OR_RETURN(a, add(a, x[1]));
  MIXRT_ASSIGN_OR_RETURN(Tensor d, tanh(a));
  return std::vector<Tensor>{d};
}

// One group whose intermediates never reach memory the host allocates; y
// is read from outside, the result stored.
TEST_F(FusionHost, AConvexGroupRunsAsOneNodeInEveryMode) {
  const std::vector<Tensor> in = {Random({8, 16}, 3), Random({8, 16}, 4)};
  const auto fn = NegReluPlusYThenTanh;
  for (const char* mode : {"default", "reduce-overhead"}) {
    const std::string explain = CompareWithEager(fn, in, mode);
    EXPECT_THAT(explain,
                HasSubstr("1 fused kernels for 4 of 4 launches offered: "
                          "stepwise: unary, unary, binary, unary"))
        << explain;
    EXPECT_THAT(explain, HasSubstr("= fused[stepwise"));
    EXPECT_THAT(explain, Not(HasSubstr("refused")));
  }
}

// A kernel that keeps its intermediates in scratch memory (ABI 1.2): the
// host allocates what it asked for (relu's, neg's and add's [8, 16] f32
// results, 512 bytes each) from the device's allocator, hands it over
// before the first run, and frees it with the kernel.
TEST_F(FusionHost, AKernelAskingForScratchGetsItFromTheDeviceAllocator) {
  ASSERT_EQ(setenv("MIXRT_FAKE_FUSION_SCRATCH", "1", 1), 0);
  PluginEnvironmentChanged();
  const std::vector<Tensor> in = {Random({8, 16}, 3), Random({8, 16}, 4)};
  const auto fn = NegReluPlusYThenTanh;
  const uint64_t before = device_.backend()->allocator(0).stats().bytes_in_use;
  {
    const std::string explain = CompareWithEager(fn, in, "default");
    EXPECT_THAT(explain,
                HasSubstr("stepwise: unary, unary, binary, unary (1536 B "
                          "scratch)"))
        << explain;
    EXPECT_THAT(explain, Not(HasSubstr("refused"))) << explain;
  }
  auto f = compile(fn, {.mode = "reduce-overhead"});
  ASSERT_TRUE(f.ok()) << f.status();
  for (int call = 0; call < 2; ++call) ASSERT_TRUE((*f)(in).ok());
  EXPECT_GE(device_.backend()->allocator(0).stats().bytes_in_use,
            before + 1536);
  unsetenv("MIXRT_FAKE_FUSION_SCRATCH");
}

// max-autotune times the fused kernel against its launches on the graph's
// shapes: one made 20 ms slower is refused (the launches run, bit for bit
// eager's), while "default" runs it as the plugin compiled it. The
// decision goes to the compile cache: a later compile (another process,
// here a cache read anew) reuses it without timing.
TEST_F(FusionHost, MaxAutotuneKeepsTheLaunchesWhenTheFusedKernelIsSlower) {
  const std::string dir = ::testing::TempDir() + "/max_autotune_cache";
  ASSERT_EQ(setenv("MIXRT_CACHE_DIR", dir.c_str(), 1), 0);
  compiler::ArtifactCache::ResetForTest();
  ASSERT_EQ(setenv("MIXRT_FAKE_FUSION_SLEEP_US", "20000", 1), 0);
  PluginEnvironmentChanged();
  const std::vector<Tensor> in = {Random({8, 16}, 5), Random({8, 16}, 6)};
  auto fn =
      [](const std::vector<Tensor>& x) -> absl::StatusOr<std::vector<Tensor>> {
    MIXRT_ASSIGN_OR_RETURN(Tensor a, relu(x[0]));
    MIXRT_ASSIGN_OR_RETURN(a, add(a, x[1]));
    return std::vector<Tensor>{a};
  };
  const std::string tuned = CompareWithEager(fn, in, "max-autotune");
  const std::string plain = CompareWithEager(fn, in, "default");
  compiler::ArtifactCache::ResetForTest();  // As a new process finds it.
  const std::string again = CompareWithEager(fn, in, "max-autotune");
  unsetenv("MIXRT_FAKE_FUSION_SLEEP_US");
  unsetenv("MIXRT_CACHE_DIR");
  compiler::ArtifactCache::ResetForTest();
  EXPECT_THAT(tuned,
              ::testing::ContainsRegex("refused group 0: slower than its 2 "
                                       "launches \\([0-9.]+ vs [0-9.]+ us\\)"))
      << tuned;
  EXPECT_THAT(tuned, Not(HasSubstr("= fused[")));
  EXPECT_THAT(plain, HasSubstr("= fused[stepwise: unary, binary]")) << plain;
  EXPECT_THAT(again, HasSubstr("us, timed by an earlier compile)")) << again;
  EXPECT_THAT(again, Not(HasSubstr("= fused[")));
}

// relu(x) is inside the group and read by a matmul outside it: the group
// stores it (the matmul runs after the group), and keeps neg's to itself.
TEST_F(FusionHost, AValueANodeOutsideReadsIsStoredForIt) {
  const std::vector<Tensor> in = {Random({8, 16}, 6), Random({16, 16}, 7),
                                  Random({8, 16}, 8)};
  auto fn =
      [](const std::vector<Tensor>& x) -> absl::StatusOr<std::vector<Tensor>> {
    MIXRT_ASSIGN_OR_RETURN(Tensor a, relu(x[0]));
    MIXRT_ASSIGN_OR_RETURN(Tensor b, neg(a));
    MIXRT_ASSIGN_OR_RETURN(Tensor m, matmul(a, x[1]));
    MIXRT_ASSIGN_OR_RETURN(Tensor c, add(b, x[2]));
    return std::vector<Tensor>{c, m};
  };
  for (const char* mode : {"default", "reduce-overhead"}) {
    const std::string explain = CompareWithEager(fn, in, mode);
    EXPECT_THAT(explain,
                HasSubstr("1 fused kernels for 3 of 4 launches offered"))
        << explain;
  }
}

// With fusion off the same graph runs launch by launch.
// A plugin is not trusted to fuse right: each new group is checked
// against its launches (on by default for plugins other than mixrt's own),
// and one that stores nothing or wrong values is dropped with the reason,
// its launches running instead; a failing claim and sparse group numbers
// (which the SDK refuses for its plugin) leave the call working op by op.
TEST_F(FusionHost, HostileFusionIsCheckedDroppedOrDegraded) {
  std::vector<Tensor> in;
  auto fn =
      [](const std::vector<Tensor>& x) -> absl::StatusOr<std::vector<Tensor>> {
    MIXRT_ASSIGN_OR_RETURN(Tensor a, neg(x[0]));
    MIXRT_ASSIGN_OR_RETURN(a, add(a, x[1]));
    MIXRT_ASSIGN_OR_RETURN(Tensor d, tanh(a));
    return std::vector<Tensor>{d};
  };
  struct Case {
    const char* fusion;
    const char* explain;
  };
  for (const Case& c :
       {Case{"noop", "dropped: its results differ from its launches'"},
        Case{"wrong", "dropped: its results differ from its launches'"},
        Case{"fail_claim",
             "its fusion claim failed (backend 'fake_accelerator' "
             "fusion_claim: fake: the claim fails"},
        Case{"sparse", "fusion_claim: group 1073741824 of 3 nodes"},
        Case{"greedy", "[checked against its launches]"}}) {
    SCOPED_TRACE(c.fusion);
    ASSERT_EQ(setenv("MIXRT_FAKE_FUSION", c.fusion, 1), 0);
    PluginEnvironmentChanged();
    in = {Random({8, 16}, 5), Random({8, 16}, 6)};
    ::testing::internal::CaptureStderr();
    const std::string explain = CompareWithEager(fn, in, "default");
    const std::string log = ::testing::internal::GetCapturedStderr();
    EXPECT_THAT(explain, HasSubstr(c.explain)) << explain;
    if (std::string(c.fusion) == "noop" || std::string(c.fusion) == "wrong") {
      EXPECT_THAT(log, HasSubstr("runs op by op: dropped:"));
      EXPECT_THAT(explain, Not(HasSubstr("= fused[")));
    }
  }
  // Off, a wrong kernel is trusted: the check is what stands between it
  // and the results.
  ASSERT_EQ(setenv("MIXRT_FAKE_FUSION", "wrong", 1), 0);
  ASSERT_EQ(setenv("MIXRT_COMPILE_CHECK_FUSION", "off", 1), 0);
  PluginEnvironmentChanged();
  in = {Random({8, 16}, 5), Random({8, 16}, 6)};
  auto f = compile(fn);
  ASSERT_TRUE(f.ok());
  ASSERT_TRUE((*f)(in).ok());
  const std::vector<float> got = *(*(*f)(in))[0].to_float_vector();
  const std::vector<float> want = *(*fn(in))[0].to_float_vector();
  EXPECT_NE(got, want);
  unsetenv("MIXRT_COMPILE_CHECK_FUSION");
}

TEST_F(FusionHost, FusionOffRunsOpByOp) {
  ASSERT_EQ(setenv("MIXRT_COMPILE_FUSION", "0", 1), 0);
  const std::vector<Tensor> in = {Random({4, 4}, 5)};
  auto fn =
      [](const std::vector<Tensor>& x) -> absl::StatusOr<std::vector<Tensor>> {
    MIXRT_ASSIGN_OR_RETURN(Tensor a, relu(x[0]));
    MIXRT_ASSIGN_OR_RETURN(Tensor d, neg(a));
    return std::vector<Tensor>{d};
  };
  const std::string explain = CompareWithEager(fn, in, "default");
  unsetenv("MIXRT_COMPILE_FUSION");
  EXPECT_THAT(explain, HasSubstr("fusion: none (MIXRT_COMPILE_FUSION=0)"));
}

}  // namespace
}  // namespace mixrt
