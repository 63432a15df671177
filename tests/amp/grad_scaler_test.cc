// GradScaler: scale trajectories for scripted inf/finite steps, the
// per-optimizer state machine and its messages, skipped steps leaving
// parameters bit-identical, state_dict round trips.
#include "core/amp/grad_scaler/grad_scaler.h"

#include <cfloat>
#include <cmath>

#include "absl/status/status.h"
#include "core/amp/autocast/autocast.h"
#include "core/functional/ops.h"
#include "core/optim/optimizer.h"
#include "core/tensor/factories.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/op_test_util.h"
#include "tests/testing/test_plugins.h"

namespace mixrt {
namespace {

using ::testing::HasSubstr;
using testing::MakeTensor;
using testing::Values;

class GradScalerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    device_ = testing::ReferenceDevice();
    w_ = MakeTensor(device_, {0.5, -1.0}, {2});
    ASSERT_TRUE(w_.set_requires_grad(true).ok());
  }

  // loss = sum(w * x); x may hold inf to make the gradients overflow.
  absl::Status Backward(GradScaler& scaler, float x0) {
    Tensor x = MakeTensor(device_, {x0, 2.0f}, {2});
    auto loss = sum(*mul(w_, x));
    if (!loss.ok()) return loss.status();
    auto scaled = scaler.scale(*loss);
    if (!scaled.ok()) return scaled.status();
    return scaled->backward();
  }

  Device device_;
  Tensor w_;
};

TEST_F(GradScalerTest, ScalesTheLossByTwoToTheSixteenByDefault) {
  GradScaler scaler(device_);
  Tensor loss = MakeTensor(device_, {1.5}, {});
  EXPECT_EQ(*scaler.scale(loss)->item(), 1.5 * 65536);
  EXPECT_EQ(*scaler.get_scale(), 65536);
}

TEST_F(GradScalerTest, ScaleTrajectoryGrowsBacksOffAndNeverReachesInf) {
  GradScaler scaler(device_, {.init_scale = 4,
                              .growth_factor = 2,
                              .backoff_factor = 0.5,
                              .growth_interval = 3});
  SGD opt({w_}, {.lr = 0.1});
  // Host statement of the schedule: F = finite step, I = inf step.
  const char* script = "FFFIFFFFFF";
  double want = 4;
  int good = 0;
  for (const char* c = script; *c; ++c) {
    const std::vector<uint8_t> before = *w_.to_bytes();
    ASSERT_TRUE(Backward(scaler, *c == 'I' ? INFINITY : 1.0f).ok());
    ASSERT_TRUE(scaler.step(opt).ok());
    ASSERT_TRUE(scaler.update().ok());
    opt.zero_grad();
    if (*c == 'I') {
      want *= 0.5;
      good = 0;
      EXPECT_EQ(*w_.to_bytes(), before) << "a skipped step changed w";
      EXPECT_TRUE(*scaler.last_step_skipped());
    } else {
      EXPECT_NE(*w_.to_bytes(), before);
      if (++good == 3) {
        want *= 2;
        good = 0;
      }
    }
    ASSERT_EQ(*scaler.get_scale(), want) << "after step " << (c - script);
  }
  // At 2^127 a growth would give inf: the scale stays (gradients of 0.5 *
  // 2^127 are still finite, so this is a clean step).
  GradScaler big(device_,
                 {.init_scale = std::ldexp(1.0, 127), .growth_interval = 1});
  Tensor v = MakeTensor(device_, {1.0f}, {1});
  ASSERT_TRUE(v.set_requires_grad(true).ok());
  SGD opt2({v}, {.lr = 0});
  auto loss = sum(*scale(v, 0.5));
  ASSERT_TRUE(big.scale(*loss)->backward().ok());
  ASSERT_TRUE(big.step(opt2).ok());
  ASSERT_TRUE(big.update().ok());
  EXPECT_FALSE(*big.last_step_skipped());
  EXPECT_EQ(*big.get_scale(), std::ldexp(1.0, 127));
}

TEST_F(GradScalerTest, UnscaledGradientsAreTheTrueOnes) {
  GradScaler scaler(device_, {.init_scale = 1024});
  SGD opt({w_}, {.lr = 0.1});
  ASSERT_TRUE(Backward(scaler, 3.0f).ok());
  EXPECT_THAT(Values(w_.grad()), ::testing::ElementsAre(3 * 1024, 2 * 1024));
  ASSERT_TRUE(scaler.unscale_(opt).ok());
  EXPECT_THAT(Values(w_.grad()), ::testing::ElementsAre(3, 2));
  ASSERT_TRUE(scaler.step(opt).ok());  // Uses the recorded unscale.
  testing::ExpectClose(Values(w_), {0.5 - 0.3, -1.0 - 0.2}, 1e-6, 0, "w");
  ASSERT_TRUE(scaler.update().ok());
}

TEST_F(GradScalerTest, MisuseErrorsNameTheMistake) {
  GradScaler scaler(device_);
  SGD opt({w_}, {.lr = 0.1});
  const char* fix =
      " but _scale is None.  This may indicate your script did not use "
      "scaler.scale(loss or outputs) earlier in the iteration.";
  EXPECT_EQ(scaler.unscale_(opt).message(),
            std::string("Attempted unscale_") + fix);
  EXPECT_EQ(scaler.step(opt).message(), std::string("Attempted step") + fix);
  EXPECT_EQ(scaler.update().message(), std::string("Attempted update") + fix);
  ASSERT_TRUE(Backward(scaler, 1.0f).ok());
  ASSERT_TRUE(scaler.unscale_(opt).ok());
  EXPECT_EQ(scaler.unscale_(opt).message(),
            "unscale_() has already been called on this optimizer since the "
            "last update().");
  ASSERT_TRUE(scaler.step(opt).ok());
  EXPECT_EQ(scaler.unscale_(opt).message(),
            "unscale_() is being called after step().");
  EXPECT_EQ(scaler.step(opt).message(),
            "step() has already been called since the last update().");
  ASSERT_TRUE(scaler.update().ok());
  EXPECT_EQ(scaler.update().message(),
            "No inf checks were recorded prior to update.");
}

// PyTorch's scale reaches 0 after ~150 overflows in a row; then 1/scale is
// inf and the next clean step writes NaN into every parameter. mixrt's
// scale stops at FLT_MIN, and a non-finite 1/scale counts as an overflow.
TEST_F(GradScalerTest, TheScaleNeverCollapsesToZero) {
  GradScaler scaler(device_);
  SGD opt({w_}, {.lr = 0.1});
  for (int i = 0; i < 200; ++i) {
    opt.zero_grad();
    ASSERT_TRUE(Backward(scaler, INFINITY).ok());
    ASSERT_TRUE(scaler.step(opt).ok());
    ASSERT_TRUE(scaler.update().ok());
  }
  EXPECT_EQ(*scaler.get_scale(), FLT_MIN);
  opt.zero_grad();
  ASSERT_TRUE(Backward(scaler, 1.0f).ok());
  ASSERT_TRUE(scaler.step(opt).ok());
  EXPECT_FALSE(*scaler.last_step_skipped());
  // grad = x = (1, 2): w - 0.1 * grad, finite.
  testing::ExpectClose(Values(w_), {0.5 - 0.1, -1.0 - 0.2}, 1e-6, 0, "w");
  ASSERT_TRUE(scaler.update().ok());
  // A scale set below the floor by hand: 1/scale is inf, so the step is
  // skipped and nothing is written.
  ASSERT_TRUE(scaler.update(1e-45).ok());
  const std::vector<uint8_t> before = *w_.to_bytes();
  opt.zero_grad();
  ASSERT_TRUE(Backward(scaler, 1.0f).ok());
  ASSERT_TRUE(scaler.step(opt).ok());
  EXPECT_TRUE(*scaler.last_step_skipped());
  EXPECT_EQ(*w_.to_bytes(), before);
}

TEST_F(GradScalerTest, AnOptimizerWithoutGradientsIsRefusedNotCounted) {
  GradScaler scaler(device_, {.init_scale = 8, .growth_interval = 1});
  Tensor v = MakeTensor(device_, {1.0}, {1});
  ASSERT_TRUE(v.set_requires_grad(true).ok());
  SGD idle({v}, {.lr = 0.1});
  ASSERT_TRUE(Backward(scaler, 1.0f).ok());  // Gradients for w_, not v.
  EXPECT_EQ(scaler.step(idle).message(),
            "No inf checks were recorded for this optimizer.");
  // Nothing was counted: update has no inf check to go on either.
  EXPECT_EQ(scaler.update().message(),
            "No inf checks were recorded prior to update.");
  EXPECT_EQ(*scaler.get_scale(), 8);
}

// Found on the device, a skip costs no sync; but state created for a
// skipped first step would make the next real step a second one (SGD's
// buffer = grad on a first step, momentum * buf + (1 - dampening) * grad
// after). The next real step must equal a fresh optimizer's first.
TEST_F(GradScalerTest, ASkippedFirstStepLeavesNoOptimizerState) {
  auto run = [&](bool skip_first, auto make_opt) {
    Tensor w = MakeTensor(device_, {0.5, -1.0}, {2});
    EXPECT_TRUE(w.set_requires_grad(true).ok());
    auto opt = make_opt(w);
    GradScaler scaler(device_, {.init_scale = 4});
    for (float x0 : {skip_first ? INFINITY : 1.0f, 1.0f}) {
      opt.zero_grad();
      Tensor x = MakeTensor(device_, {x0, 2.0f}, {2});
      EXPECT_TRUE(scaler.scale(*sum(*mul(w, x)))->backward().ok());
      EXPECT_TRUE(scaler.step(opt).ok());
      if (x0 != 1.0f) {
        EXPECT_TRUE(opt.state_dict().empty()) << "state after a skip";
      }
      EXPECT_TRUE(scaler.update().ok());
      if (!skip_first) break;
    }
    return Values(w);
  };
  auto sgd = [](Tensor w) {
    return SGD({w}, {.lr = 0.1, .momentum = 0.9, .dampening = 0.5});
  };
  auto adamw = [](Tensor w) { return AdamW({w}, {.lr = 0.1}); };
  EXPECT_EQ(run(true, sgd), run(false, sgd));
  EXPECT_EQ(run(true, adamw), run(false, adamw));
}

// Training whose every step overflows learns nothing and, without a word,
// would go on: once the scale has collapsed (below f16's smallest, 2^-24)
// the scaler warns once, with the update count and the last finite loss.
TEST_F(GradScalerTest, ACollapsedScaleIsReportedOnce) {
  GradScaler scaler(device_);
  SGD opt({w_}, {.lr = 1e-6});
  auto steps = [&](int n, float x0) {
    for (int i = 0; i < n; ++i) {
      opt.zero_grad();
      ASSERT_TRUE(Backward(scaler, x0).ok());
      ASSERT_TRUE(scaler.step(opt).ok());
      ASSERT_TRUE(scaler.update().ok());
    }
  };
  ::testing::internal::CaptureStderr();
  steps(64, 1.0f);  // Clean: the check at update 64 reads a finite loss.
  steps(40, INFINITY);
  EXPECT_EQ(::testing::internal::GetCapturedStderr(), "")
      << "warned before the collapse";
  ::testing::internal::CaptureStderr();
  steps(200, INFINITY);
  const std::string warned = ::testing::internal::GetCapturedStderr();
  EXPECT_THAT(warned, HasSubstr("the loss scale has collapsed"));
  EXPECT_THAT(warned, HasSubstr("after 128 updates"));
  EXPECT_THAT(
      warned,
      HasSubstr("The last finite loss seen (checked every 64 updates) was "));
  EXPECT_THAT(warned, HasSubstr(" at update 64."));
  // Once: the next 200 overflowing steps say nothing more.
  EXPECT_EQ(warned.find("collapsed"), warned.rfind("collapsed"));
}

TEST_F(GradScalerTest, ScalesListsAndTakesNewScalesAsNumbersOrTensors) {
  GradScaler scaler(device_, {.init_scale = 8});
  Tensor a = MakeTensor(device_, {1.5}, {});
  Tensor b = MakeTensor(device_, {-2.0}, {1});
  auto scaled = scaler.scale(std::vector<Tensor>{a, b});
  ASSERT_TRUE(scaled.ok()) << scaled.status();
  EXPECT_EQ(*(*scaled)[0].item(), 12.0);
  EXPECT_EQ(*(*scaled)[1].item(), -16.0);
  ASSERT_TRUE(scaler.update(3.0).ok());
  EXPECT_EQ(*scaler.get_scale(), 3.0);
  ASSERT_TRUE(scaler.update(MakeTensor(device_, {5.0}, {1})).ok());
  EXPECT_EQ(*scaler.get_scale(), 5.0);
  EXPECT_EQ(scaler.update(MakeTensor(device_, {1, 2}, {2})).message(),
            "new_scale should be a float or a 1-element "
            "torch.cuda.FloatTensor or torch.FloatTensor with "
            "requires_grad=False.");
  EXPECT_EQ(*scaler.get_scale(), 5.0);
}

TEST_F(GradScalerTest, FactorsAndIntervalHaveGettersAndSetters) {
  GradScaler scaler(device_, {.init_scale = 16, .growth_interval = 5});
  EXPECT_EQ(scaler.get_growth_factor(), 2.0);
  EXPECT_EQ(scaler.get_backoff_factor(), 0.5);
  EXPECT_EQ(scaler.get_growth_interval(), 5);
  scaler.set_growth_factor(3.0);
  scaler.set_backoff_factor(0.25);
  scaler.set_growth_interval(1);
  EXPECT_EQ(scaler.get_growth_factor(), 3.0);
  EXPECT_EQ(scaler.get_backoff_factor(), 0.25);
  EXPECT_EQ(scaler.get_growth_interval(), 1);
  SGD opt({w_}, {.lr = 0.1});
  ASSERT_TRUE(Backward(scaler, 1.0f).ok());
  ASSERT_TRUE(scaler.step(opt).ok());
  ASSERT_TRUE(scaler.update().ok());
  EXPECT_EQ(*scaler.get_scale(), 48.0);  // Grew by the new factor at once.
  ASSERT_TRUE(Backward(scaler, INFINITY).ok());
  ASSERT_TRUE(scaler.step(opt).ok());
  ASSERT_TRUE(scaler.update().ok());
  EXPECT_EQ(*scaler.get_scale(), 12.0);  // Backed off by the new factor.
}

TEST_F(GradScalerTest, RefusesToUnscaleF16Gradients) {
  GradScaler scaler(device_);
  Tensor h = MakeTensor(device_, {1, 2}, {2}, DType::kF16);
  ASSERT_TRUE(h.set_requires_grad(true).ok());
  SGD opt({h}, {.lr = 0.1});
  auto loss = sum(h);
  ASSERT_TRUE(scaler.scale(*loss)->backward().ok());
  EXPECT_THAT(scaler.unscale_(opt).message(),
              HasSubstr("Attempting to unscale FP16 gradients"));
}

TEST_F(GradScalerTest, OneScaleForSeveralOptimizers) {
  Tensor v = MakeTensor(device_, {1.0}, {1});
  ASSERT_TRUE(v.set_requires_grad(true).ok());
  GradScaler scaler(device_, {.init_scale = 8});
  SGD a({w_}, {.lr = 0.1}), b({v}, {.lr = 0.1});
  auto la = sum(*mul(w_, *full({2}, 1.0, DType::kF32, device_)));
  auto lb = sum(*mul(v, *full({1}, INFINITY, DType::kF32, device_)));
  ASSERT_TRUE(scaler.scale(*la)->backward().ok());
  ASSERT_TRUE(scaler.scale(*lb)->backward().ok());
  const std::vector<uint8_t> w_before = *w_.to_bytes();
  ASSERT_TRUE(scaler.step(a).ok());  // a's grads are finite: it steps.
  ASSERT_TRUE(scaler.step(b).ok());  // b's are not: skipped.
  ASSERT_TRUE(scaler.update().ok());
  EXPECT_NE(*w_.to_bytes(), w_before);
  EXPECT_EQ(*scaler.get_scale(), 4);  // Any inf backs the shared scale off.
}

TEST_F(GradScalerTest, StateDictRoundTripWithPyTorchsKeys) {
  GradScaler scaler(device_, {.init_scale = 128, .growth_interval = 7});
  SGD opt({w_}, {.lr = 0.1});
  for (int i = 0; i < 2; ++i) {
    ASSERT_TRUE(Backward(scaler, 1.0f).ok());
    ASSERT_TRUE(scaler.step(opt).ok());
    ASSERT_TRUE(scaler.update().ok());
  }
  auto state = scaler.state_dict();
  ASSERT_TRUE(state.ok());
  EXPECT_EQ(state->at("scale"), 128);
  EXPECT_EQ(state->at("_growth_tracker"), 2);
  EXPECT_EQ(state->at("growth_interval"), 7);
  EXPECT_EQ(state->at("growth_factor"), 2);
  EXPECT_EQ(state->at("backoff_factor"), 0.5);
  GradScaler restored(device_);
  ASSERT_TRUE(restored.load_state_dict(*state).ok());
  EXPECT_EQ(*restored.state_dict(), *state);
  EXPECT_THAT(restored.load_state_dict({}).message(),
              HasSubstr("saved from a disabled instance"));
}

TEST_F(GradScalerTest, ADisabledScalerLoadsNothing) {
  GradScaler scaler(device_, {.enabled = false});
  EXPECT_TRUE(scaler.load_state_dict({}).ok());
  EXPECT_TRUE(scaler.load_state_dict({{"scale", -1.0}}).ok());
  EXPECT_EQ(*scaler.get_scale(), 1.0);
  EXPECT_TRUE(scaler.state_dict()->empty());
}

// A weight gradient past f16's range: with f16 autocast, PyTorch makes it
// in f16 (inf) and the scaler skips the step and halves the scale; mixrt's
// default makes it in f32 (finite, 8 * 100 * 1024 = 819200) and steps.
// low_precision_weight_gradients gives PyTorch's behaviour; without an
// overflow both give one gradient, to f16's rounding.
TEST_F(GradScalerTest, LowPrecisionWeightGradientsOverflowAsPyTorchs) {
  for (bool like_pytorch : {false, true}) {
    SCOPED_TRACE(like_pytorch ? "low-precision weight gradients"
                              : "f32 weight gradients");
    Tensor w = *full({4, 16}, 0.01, DType::kF32, device_);
    ASSERT_TRUE(w.set_requires_grad(true).ok());
    const Tensor before = *w.clone();
    auto sgd = *SGD::Create({w}, {.lr = 1e-6});
    GradScaler scaler(device_, {.init_scale = 1024});
    Tensor loss;
    {
      AutocastGuard autocast("cpu",
                             {.dtype = DType::kF16,
                              .low_precision_weight_gradients = like_pytorch});
      const Tensor x = *full({8, 16}, 100.0, DType::kF32, device_);
      loss = *sum(*linear(x, w, Tensor()));
    }
    ASSERT_TRUE((*scaler.scale(loss)).backward().ok());
    ASSERT_TRUE(scaler.step(*sgd).ok());
    ASSERT_TRUE(scaler.update().ok());
    EXPECT_EQ(*scaler.last_step_skipped(), like_pytorch);
    EXPECT_EQ(*scaler.get_scale(), like_pytorch ? 512 : 1024);
    EXPECT_EQ(Values(w) == Values(before), like_pytorch);
  }
  // No overflow: the f16 gradient is the f32 one rounded to f16.
  std::vector<double> grads[2];
  for (bool like_pytorch : {false, true}) {
    Tensor w = MakeTensor(device_, testing::RandomValues(4 * 16, 3), {4, 16});
    ASSERT_TRUE(w.set_requires_grad(true).ok());
    Tensor loss;
    {
      AutocastGuard autocast("cpu",
                             {.dtype = DType::kF16,
                              .low_precision_weight_gradients = like_pytorch});
      const Tensor x =
          MakeTensor(device_, testing::RandomValues(8 * 16, 4), {8, 16});
      loss = *sum(*linear(x, w, Tensor()));
    }
    ASSERT_TRUE(loss.backward().ok());
    grads[like_pytorch] = Values(w.grad());
  }
  for (size_t i = 0; i < grads[0].size(); ++i) {
    EXPECT_NEAR(grads[1][i], grads[0][i],
                std::ldexp(std::fabs(grads[0][i]), -11))
        << i;
  }
}

TEST_F(GradScalerTest, DisabledScalerIsAPassThrough) {
  GradScaler scaler(device_, {.enabled = false});
  SGD opt({w_}, {.lr = 0.1});
  Tensor loss = MakeTensor(device_, {2.0}, {});
  EXPECT_EQ(*scaler.scale(loss)->item(), 2.0);
  ASSERT_TRUE(Backward(scaler, 1.0f).ok());
  ASSERT_TRUE(scaler.step(opt).ok());
  ASSERT_TRUE(scaler.update().ok());
  EXPECT_EQ(*scaler.get_scale(), 1.0);
  EXPECT_TRUE(scaler.state_dict()->empty());
}

}  // namespace
}  // namespace mixrt
