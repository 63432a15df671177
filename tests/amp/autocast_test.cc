// Autocast: output dtypes follow each device type's policy table; guards
// nest, disable and restore; the weight-cast cache lives for the outermost
// region; state is per thread; unsupported precisions narrow with a
// warning, through a fake accelerator's capability matrix and through
// ONEDNN_MAX_CPU_ISA on the real CPU plugin (autocast_avx2_test).
#include "core/amp/autocast/autocast.h"

#include <cstdlib>
#include <thread>

#include "absl/status/status.h"
#include "core/amp/autocast/autocast_policy.h"
#include "core/autograd/grad_mode.h"
#include "core/functional/ops.h"
#include "core/kernels/fill_copy.h"
#include "core/optim/optimizer.h"
#include "core/plugin/registry.h"
#include "core/tensor/factories.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/op_test_util.h"
#include "tests/testing/test_plugins.h"

namespace mixrt {
namespace {

using ::testing::HasSubstr;

// The bf16 weight autocast hands a linear of x and w (the cache's entry).
Tensor CastOf(const Tensor& x, const Tensor& w) {
  auto in = AutocastInputs("linear", MIXRT_OP_CLASS_MATMUL, {x, w});
  EXPECT_TRUE(in.ok()) << in.status();
  return in.ok() ? (*in)[1] : Tensor();
}

Device Load(const std::string& path) {
  auto backend = Registry::Global().Load(testing::RunfilePath(path));
  EXPECT_TRUE(backend.ok()) << backend.status();
  return backend.ok() ? Device(*backend, 0) : Device();
}

// Runs every op of the tables that mixrt has and returns its output dtype.
std::map<std::string, DType> OutputDTypes(const Device& d) {
  std::map<std::string, DType> out;
  auto x = randn({4, 6}, DType::kF32, d);
  auto w = randn({5, 6}, DType::kF32, d);
  auto t = randn({4, 6}, DType::kF32, d);
  auto cls = from_ints({0, 1, 2, 3}, {4}, DType::kI64, d);
  auto img = randn({1, 2, 5, 5}, DType::kF32, d);
  auto k = randn({3, 2, 3, 3}, DType::kF32, d);
  auto p = rand({4, 6}, DType::kF32, d, 0.1, 0.9);
  auto ln_w = ones({6}, DType::kF32, d);
  auto ln_b = zeros({6}, DType::kF32, d);
  out["linear"] = linear(*x, *w, Tensor())->dtype();
  out["matmul"] = matmul(*x, *transpose(*w, 0, 1))->dtype();
  out["conv2d"] = conv2d(*img, *k, Tensor())->dtype();
  out["mse_loss"] = mse_loss(*x, *t)->dtype();
  out["l1_loss"] = l1_loss(*x, *t)->dtype();
  out["smooth_l1_loss"] = smooth_l1_loss(*x, *t)->dtype();
  out["cross_entropy"] = cross_entropy(*x, *cls)->dtype();
  out["binary_cross_entropy_with_logits"] =
      binary_cross_entropy_with_logits(*x, *p)->dtype();
  out["softmax"] = softmax(*x, -1)->dtype();
  out["log_softmax"] = log_softmax(*x, -1)->dtype();
  out["layer_norm"] = layer_norm(*x, 1, *ln_w, *ln_b)->dtype();
  out["sum"] = sum(*x)->dtype();
  out["exp"] = exp(*x)->dtype();
  out["relu"] = relu(*x)->dtype();
  return out;
}

TEST(Autocast, CpuPolicyMatchesPyTorchsCpuLists) {
  const Device d = testing::ReferenceDevice();
  AutocastGuard guard("cpu", DType::kBF16);
  const auto dtypes = OutputDTypes(d);
  for (const char* op : {"linear", "matmul", "conv2d"}) {
    EXPECT_EQ(dtypes.at(op), DType::kBF16) << op;
  }
  for (const char* op : {"mse_loss", "l1_loss", "smooth_l1_loss",
                         "cross_entropy", "binary_cross_entropy_with_logits"}) {
    EXPECT_EQ(dtypes.at(op), DType::kF32) << op;
  }
  // Not on the CPU lists: they run in what they are given (f32 here).
  for (const char* op :
       {"softmax", "log_softmax", "layer_norm", "sum", "exp", "relu"}) {
    EXPECT_EQ(dtypes.at(op), DType::kF32) << op;
  }
}

TEST(Autocast, CudaPolicyOnAFakeAccelerator) {
  const Device d = Load("tests/fixtures/libmixrt_fake_accelerator.so");
  ASSERT_EQ(d.type(), "cuda");
  {
    AutocastGuard guard("cuda");  // f16 by default, as torch.autocast("cuda")
    auto x = randn({4, 6}, DType::kF32, d);
    // An f16 activation into f32-list ops comes out f32.
    auto h = cast(*x, DType::kF16);
    for (auto r : {softmax(*h, -1), log_softmax(*h, -1), sum(*h), exp(*h)}) {
      ASSERT_TRUE(r.ok()) << r.status();
      EXPECT_EQ(r->dtype(), DType::kF32);
    }
    // mean is not on PyTorch's CUDA f32 list: f16 in, f16 out.
    auto m = mean(*h);
    ASSERT_TRUE(m.ok()) << m.status();
    EXPECT_EQ(m->dtype(), DType::kF16);
    const auto dtypes = OutputDTypes(d);
    EXPECT_EQ(dtypes.at("linear"), DType::kF16);
    EXPECT_EQ(dtypes.at("conv2d"), DType::kF16);
    EXPECT_EQ(dtypes.at("layer_norm"), DType::kF32);
    EXPECT_EQ(dtypes.at("mse_loss"), DType::kF32);
    EXPECT_EQ(dtypes.at("relu"), DType::kF32);  // Unlisted: as given.
    auto p = rand({4}, DType::kF32, d, 0.1, 0.9);
    auto bce = binary_cross_entropy(*p, *p);
    ASSERT_FALSE(bce.ok());
    EXPECT_THAT(bce.status().message(),
                HasSubstr("binary_cross_entropy_with_logits"));
  }
  auto p = rand({4}, DType::kF32, d, 0.1, 0.9);
  EXPECT_TRUE(binary_cross_entropy(*p, *p).ok());  // Fine outside autocast.
}

TEST(Autocast, GuardsNestDisableAndRestore) {
  const Device d = testing::ReferenceDevice();
  auto x = randn({2, 3}, DType::kF32, d);
  auto w = randn({4, 3}, DType::kF32, d);
  EXPECT_FALSE(AutocastEnabled("cpu"));
  {
    AutocastGuard outer("cpu", DType::kBF16);
    EXPECT_EQ(linear(*x, *w, Tensor())->dtype(), DType::kBF16);
    {
      AutocastGuard off("cpu", DType::kBF16, /*enabled=*/false);
      EXPECT_EQ(linear(*x, *w, Tensor())->dtype(), DType::kF32);
      {
        AutocastGuard inner("cpu", DType::kF16);
        EXPECT_EQ(linear(*x, *w, Tensor())->dtype(), DType::kF16);
      }
      EXPECT_EQ(linear(*x, *w, Tensor())->dtype(), DType::kF32);
    }
    EXPECT_EQ(linear(*x, *w, Tensor())->dtype(), DType::kBF16);
  }
  EXPECT_FALSE(AutocastEnabled("cpu"));
  EXPECT_EQ(linear(*x, *w, Tensor())->dtype(), DType::kF32);
}

TEST(Autocast, WeightCastCacheLivesForTheOutermostRegion) {
  const Device d = testing::ReferenceDevice();
  auto x = randn({2, 3}, DType::kF32, d);
  auto w = randn({4, 3}, DType::kF32, d);
  ASSERT_TRUE(w->set_requires_grad(true).ok());
  {
    AutocastGuard outer("cpu", DType::kBF16);
    ASSERT_TRUE(linear(*x, *w, Tensor()).ok());
    EXPECT_EQ(AutocastCacheSize(), 1u);  // The leaf weight, not x.
    {
      AutocastGuard inner("cpu", DType::kBF16);
      ASSERT_TRUE(linear(*x, *w, Tensor()).ok());
      EXPECT_EQ(AutocastCacheSize(), 1u);  // A hit.
    }
    EXPECT_EQ(AutocastCacheSize(), 1u);  // Inner exit keeps it.
    {
      InferenceModeGuard inference;
      ASSERT_TRUE(linear(*x, *w, Tensor()).ok());
      EXPECT_EQ(AutocastCacheSize(), 1u);  // Not cached under inference.
    }
  }
  EXPECT_EQ(AutocastCacheSize(), 0u);  // Cleared at the outermost exit.
  {
    AutocastGuard no_cache(
        "cpu", AutocastOptions{DType::kBF16, false, true, /*cache=*/false});
    ASSERT_TRUE(linear(*x, *w, Tensor()).ok());
    EXPECT_EQ(AutocastCacheSize(), 0u);
  }
}

// Gradient accumulation inside one autocast region: each forward uses the
// cached cast of the weight, and each backward runs through its node (a
// cast saves nothing, so the first backward must not free it), giving the
// weight twice one forward's gradient. The bypass (what a tracing
// compiler uses) neither reads nor fills the cache.
TEST(Autocast, ACachedCastServesEveryBackwardInTheRegion) {
  const Device d = testing::ReferenceDevice();
  auto x = randn({2, 3}, DType::kF32, d);
  auto w = randn({4, 3}, DType::kF32, d);
  ASSERT_TRUE(w->set_requires_grad(true).ok());
  std::vector<double> once;
  {
    AutocastGuard bf16("cpu", DType::kBF16);
    for (int step = 0; step < 2; ++step) {
      auto y = sum(*linear(*x, *w, Tensor()));
      ASSERT_TRUE(y.ok());
      const absl::Status backward = y->backward();
      ASSERT_TRUE(backward.ok()) << "step " << step << ": " << backward;
      if (step == 0) once = *w->grad().to_double_vector();
    }
    EXPECT_EQ(AutocastCacheSize(), 1u);
    {
      AutocastCacheBypass bypass;
      ASSERT_TRUE(linear(*x, *(*w).detach().clone(), Tensor()).ok());
      auto fresh = (*w).clone();
      ASSERT_TRUE(fresh->set_requires_grad(true).ok());
      ASSERT_TRUE(linear(*x, *fresh, Tensor()).ok());
      EXPECT_EQ(AutocastCacheSize(), 1u);  // Not filled.
    }
  }
  const std::vector<double> twice = *w->grad().to_double_vector();
  for (size_t i = 0; i < once.size(); ++i)
    EXPECT_EQ(twice[i], 2 * once[i]) << i;
}

TEST(Autocast, StateIsPerThread) {
  const Device d = testing::ReferenceDevice();
  AutocastGuard here("cpu", DType::kBF16);
  DType other = DType::kBool;
  std::thread t([&] {
    auto x = randn({2, 3}, DType::kF32, d);
    auto w = randn({4, 3}, DType::kF32, d);
    other = linear(*x, *w, Tensor())->dtype();
  });
  t.join();
  EXPECT_EQ(other, DType::kF32);
  EXPECT_TRUE(AutocastEnabled("cpu"));
}

TEST(Autocast, NarrowsUnsupportedPrecisionAndExplains) {
  ASSERT_EQ(setenv("MIXRT_FAKE_UNSUPPORTED", "matmul/f16", 1), 0);
  // Only this test's fresh registry sees the env var.
  Registry registry;
  auto backend = registry.Load(
      testing::RunfilePath("tests/fixtures/libmixrt_fake_accelerator.so"));
  unsetenv("MIXRT_FAKE_UNSUPPORTED");
  ASSERT_TRUE(backend.ok()) << backend.status();
  const Device d(*backend, 0);
  auto x = randn({2, 3}, DType::kF32, d);
  auto w = randn({4, 3}, DType::kF32, d);
  SetAutocastLogging(true);
  {
    AutocastGuard guard("cuda", DType::kF16);
    auto y = linear(*x, *w, Tensor());
    ASSERT_TRUE(y.ok());
    EXPECT_EQ(y->dtype(), DType::kBF16);  // f16 -> bf16.
  }
  const std::vector<AutocastDecision> log = TakeAutocastLog();
  SetAutocastLogging(false);
  ASSERT_EQ(log.size(), 1u);
  EXPECT_EQ(log[0].op, "linear");
  EXPECT_EQ(log[0].ran, DType::kBF16);
  EXPECT_THAT(log[0].why, HasSubstr("f16 matmul is unsupported"));
  bool warned = false;
  for (const std::string& w : AutocastWarnings()) {
    warned |= w.find("f16 matmul is unsupported on fake_accelerator:0") !=
              std::string::npos;
  }
  EXPECT_TRUE(warned);
  EXPECT_THAT(FormatAutocastLog(log), HasSubstr("linear"));
}

TEST(Autocast, AutoPrecisionPicksTheFastestNative) {
  ASSERT_EQ(setenv("MIXRT_FAKE_SPEEDS", "matmul/f16=2.5,matmul/bf16=1.8", 1),
            0);
  Registry registry;
  auto backend = registry.Load(
      testing::RunfilePath("tests/fixtures/libmixrt_fake_accelerator.so"));
  unsetenv("MIXRT_FAKE_SPEEDS");
  ASSERT_TRUE(backend.ok());
  const Device d(*backend, 0);
  EXPECT_EQ(AutoPrecision(d, MIXRT_OP_CLASS_MATMUL).dtype, DType::kF16);
  // Elementwise reports no measured gain: native, unmeasured, f16 first.
  EXPECT_EQ(AutoPrecision(d, MIXRT_OP_CLASS_ELEMENTWISE).dtype, DType::kF16);
}

TEST(Autocast, GlobalSwitchTurnsAmpOff) {
  const Device d = testing::ReferenceDevice();
  auto x = randn({2, 3}, DType::kF32, d);
  auto w = randn({4, 3}, DType::kF32, d);
  SetAmpGloballyDisabled(true);
  {
    AutocastGuard guard("cpu", DType::kBF16);
    EXPECT_EQ(linear(*x, *w, Tensor())->dtype(), DType::kF32);
  }
  SetAmpGloballyDisabled(false);
}

TEST(Autocast, ACpuDtypeOtherThanBf16OrF16WarnsAndDisables) {
  const Device d = testing::ReferenceDevice();
  auto x = randn({2, 3}, DType::kF32, d);
  auto w = randn({4, 3}, DType::kF32, d);
  for (DType asked : {DType::kI32, DType::kF32}) {
    AutocastGuard guard("cpu", asked);
    EXPECT_FALSE(AutocastEnabled("cpu")) << DTypeName(asked);
    auto y = linear(*x, *w, Tensor());
    ASSERT_TRUE(y.ok()) << y.status();
    EXPECT_EQ(y->dtype(), DType::kF32);
  }
  bool warned = false;
  for (const std::string& text : AutocastWarnings()) {
    warned |= text.find(
                  "In CPU autocast, but the target dtype (i32) is not "
                  "supported. Disabling autocast.") != std::string::npos;
  }
  EXPECT_TRUE(warned);
}

TEST(Autocast, AnInvalidDtypeElsewhereIsAnErrorAndChangesNothing) {
  const Device d = Load("tests/fixtures/libmixrt_fake_accelerator.so");
  auto x = randn({2, 3}, DType::kF32, d);
  auto w = randn({4, 3}, DType::kF32, d);
  ASSERT_TRUE(w->set_requires_grad(true).ok());
  {
    AutocastGuard guard("cuda", DType::kI32);
    auto y = linear(*x, *w, Tensor());
    ASSERT_FALSE(y.ok());
    EXPECT_THAT(y.status().message(),
                HasSubstr("dtype i32 is not a lower-precision float"));
  }
  EXPECT_FALSE(w->grad().defined());
  EXPECT_EQ(linear(*x, *w, Tensor())->dtype(), DType::kF32);
}

// torch.autocast's dtype=None and cache_enabled=None take the enclosing
// region's values, not the device type's defaults.
TEST(Autocast, NestedGuardsInheritDtypeAndCacheFlag) {
  const Device d = testing::ReferenceDevice();
  auto x = randn({2, 3}, DType::kF32, d);
  auto w = randn({4, 3}, DType::kF32, d);
  ASSERT_TRUE(w->set_requires_grad(true).ok());
  EXPECT_EQ(AutocastDType("cpu"), DType::kBF16);
  EXPECT_TRUE(AutocastCacheEnabled("cpu"));
  {
    AutocastGuard outer("cpu", AutocastOptions{DType::kF16, false, true,
                                               /*cache_enabled=*/false});
    {
      AutocastGuard inner("cpu");  // No dtype, no cache flag.
      EXPECT_EQ(AutocastDType("cpu"), DType::kF16);
      EXPECT_FALSE(AutocastCacheEnabled("cpu"));
      EXPECT_EQ(linear(*x, *w, Tensor())->dtype(), DType::kF16);
      EXPECT_EQ(AutocastCacheSize(), 0u);
      {
        AutocastGuard innermost("cpu", DType::kBF16, true, true);
        EXPECT_EQ(linear(*x, *w, Tensor())->dtype(), DType::kBF16);
        EXPECT_EQ(AutocastCacheSize(), 1u);
      }
    }
    EXPECT_EQ(AutocastDType("cpu"), DType::kF16);
  }
  EXPECT_EQ(AutocastDType("cpu"), DType::kBF16);
}

// at::autocast::promote_type: start from the autocast dtype, f32 wins, a
// second lower-precision dtype is an error.
TEST(Autocast, PromoteRuleFollowsPyTorch) {
  const Device d = testing::ReferenceDevice();
  auto f32 = *randn({2}, DType::kF32, d);
  auto bf16 = *f32.to(DType::kBF16);
  auto f16 = *f32.to(DType::kF16);
  auto i64 = *from_ints({1, 2}, {2}, DType::kI64, d);
  EXPECT_EQ(*AutocastPromoteType(DType::kBF16, {bf16, bf16}), DType::kBF16);
  EXPECT_EQ(*AutocastPromoteType(DType::kBF16, {bf16, f32}), DType::kF32);
  EXPECT_EQ(*AutocastPromoteType(DType::kF16, {f32, f16}), DType::kF32);
  EXPECT_EQ(*AutocastPromoteType(DType::kF16, {i64, Tensor()}), DType::kF16);
  auto mixed = AutocastPromoteType(DType::kBF16, {bf16, f16});
  ASSERT_FALSE(mixed.ok());
  EXPECT_THAT(mixed.status().message(),
              HasSubstr("Unexpected floating ScalarType in "
                        "at::autocast::prioritize"));
  // Inputs are taken in order, as prioritize() folds them: the clash comes
  // before the f32 that would have won.
  EXPECT_FALSE(AutocastPromoteType(DType::kF16, {f16, bf16, f32}).ok());
  EXPECT_FALSE(AutocastPromoteType(DType::kBF16, {f16}).ok());
}

// A weight freed inside a region may hand its address to the next weight
// allocated; that weight must get its own cast, not the dead one's. Under
// no_grad the cast records no graph, so nothing but the cache remembers the
// freed weight (with grad mode on, the graph's accumulator pins it).
TEST(Autocast, WeightCastCacheNeverServesAFreedWeight) {
  const Device d = testing::ReferenceDevice();
  auto x = *ones({1, 2}, DType::kF32, d);
  AutocastGuard guard("cpu", DType::kBF16);
  NoGradGuard no_grad;
  for (int i = 1; i <= 50; ++i) {
    Tensor w = *full({1, 2}, i, DType::kF32, d);
    ASSERT_TRUE(w.set_requires_grad(true).ok());
    auto y = linear(x, w, Tensor());
    ASSERT_TRUE(y.ok()) << y.status();
    ASSERT_EQ(*y->item(), 2.0 * i) << "weight " << i << " got a stale cast";
  }
}

// The cache keys on the weight; a write to the weight inside the region
// (an optimizer step, copy_, a pointer handed out for writing) must make
// the next op cast it again, not serve the cast of its old values.
TEST(Autocast, AWeightWrittenInsideTheRegionIsCastAgain) {
  const Device d = testing::ReferenceDevice();
  auto x = *ones({1, 2}, DType::kF32, d);
  Tensor w = *full({1, 2}, 1.0, DType::kF32, d);
  ASSERT_TRUE(w.set_requires_grad(true).ok());
  AutocastGuard guard("cpu", DType::kBF16);
  ASSERT_EQ(*linear(x, w, Tensor())->item(), 2.0);
  // Values exact in bf16, so any stale cast shows as the old sum.
  ASSERT_TRUE(kernels::copy_(w, *full({1, 2}, 3.0, DType::kF32, d)).ok());
  EXPECT_EQ(*linear(x, w, Tensor())->item(), 6.0) << "stale after copy_";
  static_cast<float*>(w.data_ptr())[0] = 5.0f;
  EXPECT_EQ(*linear(x, w, Tensor())->item(), 8.0) << "stale after data_ptr()";
  // Reading the weight is not a write: the cast is served from the cache.
  const Tensor cached = CastOf(x, w);
  ASSERT_TRUE(w.to_bytes().ok());
  EXPECT_TRUE(CastOf(x, w).shares_storage_with(cached));
}

// A training loop inside one autocast region: each step's SGD update must
// reach the next forward (the loss falls), as it does with a guard per step.
TEST(Autocast, ATrainingLoopInsideOneRegionLearns) {
  const Device d = testing::ReferenceDevice();
  auto x = *full({4, 2}, 0.5, DType::kF32, d);
  auto target = *zeros({4, 1}, DType::kF32, d);
  Tensor w = *full({1, 2}, 1.0, DType::kF32, d);
  ASSERT_TRUE(w.set_requires_grad(true).ok());
  auto sgd = *SGD::Create({w}, {.lr = 0.25});
  std::vector<double> one_region, per_step;
  auto step = [&](std::vector<double>* losses) {
    Tensor loss = *mse_loss(*linear(x, w, Tensor()), target);
    losses->push_back(*loss.item());
    ASSERT_TRUE(loss.backward().ok());
    ASSERT_TRUE(sgd->step().ok());
    sgd->zero_grad();
  };
  {
    AutocastGuard guard("cpu", DType::kBF16);
    for (int i = 0; i < 4; ++i) step(&one_region);
  }
  ASSERT_TRUE(kernels::fill_(w, 1.0).ok());
  for (int i = 0; i < 4; ++i) {
    AutocastGuard guard("cpu", DType::kBF16);
    step(&per_step);
  }
  // Both see the same weights each step: the same losses to the last bit.
  EXPECT_EQ(one_region, per_step);
  EXPECT_LT(one_region.back(), 0.5 * one_region.front());
}

TEST(AutocastPolicy, TablesAreDataWithNoDuplicates) {
  for (auto table : {CpuAutocastPolicy(), CudaAutocastPolicy()}) {
    std::set<std::string> seen;
    for (const AutocastPolicyEntry& e : table) {
      EXPECT_TRUE(seen.insert(std::string(e.op)).second) << e.op;
    }
  }
  EXPECT_EQ(AutocastPolicyFor("cuda", "softmax").category,
            AutocastCategory::kFloat32);
  EXPECT_EQ(AutocastPolicyFor("cpu", "softmax").category,
            AutocastCategory::kUnlisted);
}

}  // namespace
}  // namespace mixrt
