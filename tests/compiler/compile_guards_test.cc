// What compile(fn) guards beyond its inputs, each a result that was wrong
// without an error before: the training flag of every module the function
// calls (as torch.compile guards `training`), a tensor the function closes
// over and the variable then holds another one, a host value read through
// GuardedValue, a weight written through data_ptr() under autocast, and the
// requires_grad of a parameter the function reads. Each call's result is
// checked against the function run eagerly on the same state.
#include <cmath>
#include <vector>

#include "absl/status/statusor.h"
#include "core/amp/autocast/autocast.h"
#include "core/autograd/grad_mode.h"
#include "core/compiler/compile.h"
#include "core/functional/ops.h"
#include "core/nn/module.h"
#include "core/tensor/factories.h"
#include "core/tensor/guarded_value.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "mixrt/status_macros.h"
#include "tests/testing/test_plugins.h"

namespace mixrt {
namespace {

using ::testing::HasSubstr;

std::vector<float> Floats(const Tensor& t) { return *t.to_float_vector(); }

// The largest |a - b| over two results of one shape.
double MaxDifference(const Tensor& a, const Tensor& b) {
  const std::vector<float> x = Floats(a), y = Floats(b);
  EXPECT_EQ(x.size(), y.size());
  double worst = 0;
  for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
    worst = std::max(worst, std::fabs(static_cast<double>(x[i]) - y[i]));
  }
  return worst;
}

Tensor Only(const absl::StatusOr<std::vector<Tensor>>& out) {
  EXPECT_TRUE(out.ok()) << out.status();
  return out.ok() ? (*out)[0] : Tensor();
}

TEST(CompileGuards, AModuleTracedInEvalDropsOutOnceItTrains) {
  const Device d = testing::CpuDevice();
  auto dropout = std::make_shared<nn::Dropout>(0.5);
  dropout->eval();
  auto f = *compile([&](const std::vector<Tensor>& in)
                        -> absl::StatusOr<std::vector<Tensor>> {
    MIXRT_ASSIGN_OR_RETURN(Tensor y, dropout->forward(in[0]));
    MIXRT_ASSIGN_OR_RETURN(y, scale(y, 1.0));  // A launch of its own.
    return std::vector<Tensor>{y};
  });
  const Tensor x = *ones({64}, DType::kF32, d);
  EXPECT_EQ(Floats(Only(f({x}))), std::vector<float>(64, 1.0f));
  dropout->train();
  const std::vector<float> trained = Floats(Only(f({x})));
  const int dropped =
      static_cast<int>(std::count(trained.begin(), trained.end(), 0.0f));
  EXPECT_GT(dropped, 10) << "dropout traced in eval stayed off in training";
  EXPECT_THAT(f.Explain(),
              HasSubstr("a module's training flag = false changed"));
  // Back in eval: the first trace serves again, with no new trace.
  dropout->eval();
  const int traces = f.compiles();
  EXPECT_EQ(Floats(Only(f({x}))), std::vector<float>(64, 1.0f));
  EXPECT_EQ(f.compiles(), traces);
}

TEST(CompileGuards,
     BatchNormTracedInTrainingReplaysItsRunningStatisticsInEval) {
  const Device d = testing::CpuDevice();
  auto bn = *nn::BatchNorm2d::Create(3, d);
  auto f = *compile([&](const std::vector<Tensor>& in)
                        -> absl::StatusOr<std::vector<Tensor>> {
    MIXRT_ASSIGN_OR_RETURN(Tensor y, bn->forward(in[0]));
    return std::vector<Tensor>{y};
  });
  Generator g(4);
  const Tensor x = *randn({4, 3, 5, 5}, DType::kF32, d, 2, 3, &g);
  NoGradGuard no_grad;
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(f({x}).ok());  // Training.
  bn->eval();
  const Tensor got = Only(f({x}));
  const Tensor want = *bn->forward(x);
  EXPECT_EQ(MaxDifference(got, want), 0)
      << "a training-mode graph replayed in eval";
  // Alternating modes reuses the two traces.
  for (int i = 0; i < 10; ++i) {
    bn->train(i % 2 == 0);
    ASSERT_TRUE(f({x}).ok());
  }
  EXPECT_EQ(f.compiles(), 2);
}

TEST(CompileGuards, AClosureTensorReboundToAnotherIsRead) {
  const Device d = testing::CpuDevice();
  Generator g(5);
  Tensor w = *randn({8, 8}, DType::kF32, d, 0, 1, &g);
  auto fn = [&](const std::vector<Tensor>& in)
      -> absl::StatusOr<std::vector<Tensor>> {
    MIXRT_ASSIGN_OR_RETURN(Tensor y, linear(in[0], w, Tensor()));
    return std::vector<Tensor>{y};
  };
  for (const char* mode : {"default", "reduce-overhead"}) {
    SCOPED_TRACE(mode);
    auto f = *compile(fn, {.mode = mode});
    const Tensor x = *randn({4, 8}, DType::kF32, d, 0, 1, &g);
    NoGradGuard no_grad;
    ASSERT_TRUE(f({x}).ok());
    ASSERT_TRUE(f({x}).ok());
    w = *randn({8, 8}, DType::kF32, d, 0, 1, &g);  // The old one is freed.
    const Tensor got = Only(f({x}));
    EXPECT_LE(MaxDifference(got, Only(fn({x}))), 1e-5)
        << "the graph read the old tensor";
    EXPECT_THAT(f.Explain(),
                HasSubstr("a tensor it read that is not an input is gone"));
  }
}

TEST(CompileGuards, AGuardedHostValueThatChangesIsTracedAgain) {
  const Device d = testing::CpuDevice();
  GuardedValue<double> factor(2.0, "factor");
  auto f = *compile([&](const std::vector<Tensor>& in)
                        -> absl::StatusOr<std::vector<Tensor>> {
    MIXRT_ASSIGN_OR_RETURN(Tensor y, scale(in[0], factor.get()));
    return std::vector<Tensor>{y};
  });
  const Tensor x = *ones({4}, DType::kF32, d);
  EXPECT_EQ(Floats(Only(f({x}))), std::vector<float>(4, 2.0f));
  EXPECT_EQ(Floats(Only(f({x}))), std::vector<float>(4, 2.0f));
  factor.set(3.0);
  EXPECT_EQ(Floats(Only(f({x}))), std::vector<float>(4, 3.0f));
  EXPECT_THAT(f.Explain(), HasSubstr("factor = 2 changed"));
  EXPECT_EQ(f.compiles(), 2);
}

// Under autocast the plan keeps the weight's bf16 cast between calls; a
// write through data_ptr() moves the weight's version, so the next call
// casts again.
TEST(CompileGuards, AWeightWrittenThroughItsPointerIsCastAgain) {
  const Device d = testing::CpuDevice();
  Generator g(6);
  const Tensor w = *randn({16, 16}, DType::kF32, d, 0, 1, &g);
  const Tensor x = *randn({4, 16}, DType::kF32, d, 0, 1, &g);
  auto fn = [&](const std::vector<Tensor>& in)
      -> absl::StatusOr<std::vector<Tensor>> {
    MIXRT_ASSIGN_OR_RETURN(Tensor y, linear(in[0], w, Tensor()));
    return std::vector<Tensor>{y};
  };
  InferenceModeGuard inference;
  AutocastGuard autocast("cpu", DType::kBF16);
  auto f = *compile(fn);
  ASSERT_TRUE(f({x}).ok());
  ASSERT_TRUE(f({x}).ok());
  float* data = static_cast<float*>(w.data_ptr());
  for (int i = 0; i < 16 * 16; ++i) data[i] = 8.0f * (i % 5);
  // Both sides run bf16 GEMMs of the same bf16 operands (a packed one may
  // sum in another order) and round to bf16: within two bf16 ulps of the
  // largest result.
  const Tensor got = Only(f({x})), want = Only(fn({x}));
  double largest = 0;
  for (float v : Floats(want))
    largest = std::max(largest, std::fabs(static_cast<double>(v)));
  EXPECT_GT(largest, 10);
  EXPECT_LE(MaxDifference(got, want), std::ldexp(largest, -7))
      << "the graph kept the cast of the old weight";
}

TEST(CompileGuards, AParameterSwitchedOffGetsNoGradientAndOnGetsOne) {
  const Device d = testing::CpuDevice();
  Generator g(7);
  Tensor w1 = *randn({8, 8}, DType::kF32, d, 0, 1, &g);
  Tensor w2 = *randn({8, 8}, DType::kF32, d, 0, 1, &g);
  ASSERT_TRUE(w1.set_requires_grad(true).ok());
  auto f = *compile([&](const std::vector<Tensor>& in)
                        -> absl::StatusOr<std::vector<Tensor>> {
    MIXRT_ASSIGN_OR_RETURN(Tensor h, linear(in[0], w1, Tensor()));
    MIXRT_ASSIGN_OR_RETURN(h, linear(h, w2, Tensor()));
    MIXRT_ASSIGN_OR_RETURN(h, sum(h));
    return std::vector<Tensor>{h};
  });
  const Tensor x = *randn({4, 8}, DType::kF32, d, 0, 1, &g);
  auto step = [&] {
    const Tensor loss = Only(f({x}));
    ASSERT_TRUE(loss.backward().ok());
  };
  step();
  step();
  EXPECT_TRUE(w1.grad().defined());
  EXPECT_FALSE(w2.grad().defined());
  w1.set_grad(Tensor());
  ASSERT_TRUE(w1.set_requires_grad(false).ok());
  ASSERT_TRUE(w2.set_requires_grad(true).ok());
  step();
  EXPECT_FALSE(w1.grad().defined())
      << "a parameter switched off still gets a gradient";
  EXPECT_TRUE(w2.grad().defined())
      << "a parameter switched on gets no gradient";
  EXPECT_THAT(f.Explain(),
              HasSubstr("requires_grad of a f32[8, 8] tensor it read"));
}

}  // namespace
}  // namespace mixrt
