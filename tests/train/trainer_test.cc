// The Trainer's use_amp switch explains itself and turns AMP off where the
// device gains nothing (run with ONEDNN_MAX_CPU_ISA=AVX2 too, where bf16
// matmul is emulated); schedules and clipping helpers.
#include "core/train/trainer.h"

#include <cmath>
#include <cstdlib>
#include <limits>
#include <memory>
#include <utility>

#include "core/functional/ops.h"
#include "core/nn/module.h"
#include "core/optim/lr_scheduler.h"
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

Device Cpu() {
  auto b = Registry::Global().Load(
      testing::RunfilePath("backends/cpu/libmixrt_cpu.so"));
  EXPECT_TRUE(b.ok()) << b.status();
  return Device(*b, 0);
}

std::unique_ptr<Trainer> MakeTrainer(const Device& d, TrainerOptions o) {
  Generator g(0);
  auto model = *nn::MLP({4, 8, 3}, d, &g);
  return std::make_unique<Trainer>(
      model, std::make_unique<SGD>(model->parameters(), SgdOptions{.lr = 0.1}),
      [](const Tensor& out, const Tensor& y) { return cross_entropy(out, y); },
      d, o);
}

TEST(Trainer, UseAmpFollowsTheCapabilityMatrix) {
  const Device d = Cpu();
  const bool capped = std::getenv("ONEDNN_MAX_CPU_ISA") != nullptr;
  auto bf16 = MakeTrainer(d, {.amp_dtype = DType::kBF16});
  if (capped) {
    EXPECT_FALSE(bf16->amp_enabled());
    EXPECT_THAT(bf16->amp_reason(), HasSubstr("would be slower than f32"));
    EXPECT_THAT(bf16->amp_reason(), HasSubstr("has no bf16 matmul for avx2"));
  } else {
    EXPECT_THAT(bf16->amp_reason(), HasSubstr("bf16 matmul on cpu:0"));
  }
  // Debian's oneDNN has no f16 matmul: off unless forced, and then scaled.
  auto f16 = MakeTrainer(d, {.amp_dtype = DType::kF16});
  EXPECT_FALSE(f16->amp_enabled());
  EXPECT_THAT(f16->amp_reason(), HasSubstr("has no f16 matmul"));
  auto forced = MakeTrainer(d, {.amp_dtype = DType::kF16, .force_amp = true});
  EXPECT_TRUE(forced->amp_enabled());
  EXPECT_TRUE(forced->scaler().is_enabled());
  auto off = MakeTrainer(d, {.use_amp = false});
  EXPECT_EQ(off->amp_reason(), "off: use_amp is false");
}

// TrainerOptions::compile runs the model's forward (and its backward)
// compiled: the same kernels in the same order, so the same losses as the
// eager trainer, step by step, under bf16 autocast with the scaler.
TEST(Trainer, ACompiledModelTrainsLikeTheEagerOne) {
  const Device d = Cpu();
  auto x = randn({6, 4}, DType::kF32, d);
  auto y = from_ints({0, 1, 2, 0, 1, 2}, {6}, DType::kI64, d);
  std::vector<double> losses[2];
  for (int compiled = 0; compiled < 2; ++compiled) {
    TrainerOptions o{
        .amp_dtype = DType::kBF16, .force_amp = true, .use_scaler = true};
    if (compiled) o.compile = CompileOptions{.mode = "reduce-overhead"};
    auto t = MakeTrainer(d, o);
    for (int step = 0; step < 4; ++step) {
      auto loss = t->train_step(*x, *y);
      ASSERT_TRUE(loss.ok()) << loss.status();
      losses[compiled].push_back(*loss->item());
    }
    if (compiled) {
      // Training mode: traced once, replayed for steps 2 to 4.
      EXPECT_THAT(t->CompileExplain(), HasSubstr("1 traces, 3 replays"));
    }
    auto eval = t->evaluate({*x}, {*y});
    ASSERT_TRUE(eval.ok()) << eval.status();
    losses[compiled].push_back(eval->loss);
  }
  EXPECT_EQ(losses[1], losses[0]);
}

TEST(Trainer, AccumulatesClipsAndNamesNonFiniteGradients) {
  const Device d = Cpu();
  auto t = MakeTrainer(d, {.amp_dtype = DType::kBF16,
                           .force_amp = true,
                           .accumulation_steps = 2,
                           .clip_grad_norm = 1.0});
  auto x = randn({5, 4}, DType::kF32, d);
  auto y = from_ints({0, 1, 2, 0, 1}, {5}, DType::kI64, d);
  // The loss comes back on the device, detached, without a host read.
  auto loss = t->train_step(*x, *y);
  ASSERT_TRUE(loss.ok()) << loss.status();
  EXPECT_EQ(loss->device(), d);
  EXPECT_EQ(loss->numel(), 1);
  EXPECT_FALSE(loss->requires_grad());
  EXPECT_TRUE(loss->is_leaf());
  EXPECT_EQ(t->step(), 0);  // Half an effective batch.
  ASSERT_TRUE(t->train_step(*x, *y).ok());
  EXPECT_EQ(t->step(), 1);
  EXPECT_TRUE(t->non_finite_gradients()->empty());
  auto eval = t->evaluate({*x}, {*y});
  ASSERT_TRUE(eval.ok());
  EXPECT_GE(eval->accuracy, 0.0);
  EXPECT_LE(eval->accuracy, 1.0);
}

TEST(Optim, SchedulesAndClipping) {
  const Device d = Cpu();
  auto p = testing::MakeTensor(d, {1, 2}, {2});
  ASSERT_TRUE(p.set_requires_grad(true).ok());
  SGD sgd({p}, {.lr = 1.0});
  auto step_lr = StepLR::Create(&sgd, /*step_size=*/2, /*gamma=*/0.5);
  ASSERT_TRUE(step_lr.ok()) << step_lr.status();
  for (double want : {1.0, 0.5, 0.5, 0.25}) {
    ASSERT_TRUE(step_lr->step().ok());
    EXPECT_DOUBLE_EQ(sgd.lr(), want);
  }
  SGD sgd2({p}, {.lr = 1.0});
  auto cosine = CosineAnnealingLR::Create(&sgd2, /*t_max=*/4);
  ASSERT_TRUE(cosine.ok()) << cosine.status();
  ASSERT_TRUE(cosine->step().ok());
  EXPECT_NEAR(sgd2.lr(), (1 + std::cos(M_PI / 4)) / 2, 1e-12);
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(cosine->step().ok());
  EXPECT_NEAR(sgd2.lr(), 0.0, 1e-12);

  p.set_grad(testing::MakeTensor(d, {3, 4}, {2}));  // Norm 5.
  auto norm = clip_grad_norm_({p}, 1.0);
  ASSERT_TRUE(norm.ok());
  EXPECT_NEAR(*norm, 5.0, 1e-6);
  testing::ExpectClose(testing::Values(p.grad()), {0.6, 0.8}, 1e-5, 0,
                       "clipped");
  // Several parameters share one total norm: sqrt(3^2 + 4^2 + 12^2) = 13;
  // a bf16 gradient counts in its own values; no gradient, no part.
  Tensor q = testing::MakeTensor(d, {0}, {1});
  Tensor r = testing::MakeTensor(d, {0}, {1});
  ASSERT_TRUE(q.set_requires_grad(true).ok());
  ASSERT_TRUE(r.set_requires_grad(true).ok());
  p.set_grad(testing::MakeTensor(d, {3, 4}, {2}));
  q.set_grad(testing::MakeTensor(d, {12}, {1}, DType::kBF16));
  norm = clip_grad_norm_({p, q, r}, 6.5);
  ASSERT_TRUE(norm.ok()) << norm.status();
  EXPECT_NEAR(*norm, 13.0, 1e-5);
  const double coef = 6.5 / (13.0 + 1e-6);
  testing::ExpectClose(testing::Values(p.grad()), {3 * coef, 4 * coef}, 1e-6, 0,
                       "p clipped");
  // q's gradient is bf16: the clipped value is rounded to 8 bits.
  testing::ExpectClose(testing::Values(q.grad()), {12 * coef}, 12 * coef / 256,
                       0, "q clipped");
  // Under the limit the coefficient is exactly 1: nothing changes.
  const std::vector<uint8_t> before = *p.grad().to_bytes();
  EXPECT_NEAR(*clip_grad_norm_({p}, 100.0), 5 * coef, 1e-5);
  EXPECT_EQ(*p.grad().to_bytes(), before);
  // Other orders, as torch.nn.utils.clip_grad_norm_(norm_type=): the
  // order-p norm of all elements ({3, 4} and {12}): 19 for p = 1, 12 for
  // infinity, 1819^(1/3) for p = 3; the coefficient as for p = 2.
  const double inf = std::numeric_limits<double>::infinity();
  for (const auto& [order, want] : std::vector<std::pair<double, double>>{
           {1.0, 19.0}, {inf, 12.0}, {3.0, std::cbrt(1819.0)}}) {
    p.set_grad(testing::MakeTensor(d, {3, 4}, {2}));
    q.set_grad(testing::MakeTensor(d, {12}, {1}));
    auto n = clip_grad_norm_({p, q, r}, 6.0, order);
    ASSERT_TRUE(n.ok()) << n.status();
    EXPECT_NEAR(*n, want, want * 1e-6) << "order " << order;
    const double c = 6.0 / (want + 1e-6);
    testing::ExpectClose(testing::Values(p.grad()), {3 * c, 4 * c}, 1e-5, 0,
                         "p clipped at that order");
  }
  // A non-finite norm: an error with error_if_nonfinite (the gradients
  // untouched), else returned and the gradients scaled by its coefficient.
  p.set_grad(testing::MakeTensor(d, {static_cast<float>(inf), 4}, {2}));
  auto refused = clip_grad_norm_({p}, 1.0, 2.0, /*error_if_nonfinite=*/true);
  EXPECT_THAT(refused.status().message(),
              HasSubstr("total norm of order 2 of the gradients is inf"));
  EXPECT_THAT(testing::Values(p.grad()), ::testing::ElementsAre(inf, 4.0));
  auto scaled = clip_grad_norm_({p}, 1.0);
  ASSERT_TRUE(scaled.ok());
  EXPECT_EQ(*scaled, inf);
  EXPECT_THAT(clip_grad_norm_({p}, 1.0, 0.0).status().message(),
              HasSubstr("norm_type is 0; expected a positive order"));
  p.set_grad(testing::MakeTensor(d, {-3, 0.25}, {2}));
  ASSERT_TRUE(clip_grad_value_({p}, 0.5).ok());
  EXPECT_THAT(testing::Values(p.grad()), ::testing::ElementsAre(-0.5, 0.25));
}

// maximize=true as torch's: each step takes -grad, so two steps ascending
// on g are bit for bit two steps descending on -g (SGD with momentum and
// weight decay, AdamW), and differ from descending on g.
TEST(Optim, MaximizeStepsOnTheNegatedGradient) {
  const Device d = Cpu();
  const std::vector<float> start = {0.5f, -1.25f, 2.0f};
  const std::vector<float> g = {0.3f, -0.7f, 0.05f};
  const std::vector<float> minus_g = {-0.3f, 0.7f, -0.05f};
  auto run = [&](bool maximize, const std::vector<float>& grad,
                 bool adamw) -> std::vector<double> {
    Tensor p = testing::MakeTensor(d, start, {3});
    EXPECT_TRUE(p.set_requires_grad(true).ok());
    std::unique_ptr<Optimizer> opt;
    if (adamw) {
      opt = std::make_unique<AdamW>(
          std::vector<Tensor>{p},
          AdamWOptions{.lr = 0.1, .weight_decay = 0.01, .maximize = maximize});
    } else {
      opt = std::make_unique<SGD>(std::vector<Tensor>{p},
                                  SgdOptions{.lr = 0.1,
                                             .momentum = 0.9,
                                             .weight_decay = 0.01,
                                             .maximize = maximize});
    }
    for (int step = 0; step < 2; ++step) {
      p.set_grad(testing::MakeTensor(d, grad, {3}));
      EXPECT_TRUE(opt->step().ok());
    }
    return testing::Values(p);
  };
  for (bool adamw : {false, true}) {
    EXPECT_EQ(run(true, g, adamw), run(false, minus_g, adamw))
        << (adamw ? "AdamW" : "SGD");
    EXPECT_NE(run(true, g, adamw), run(false, g, adamw))
        << (adamw ? "AdamW" : "SGD");
  }
}

TEST(Optim, RefusesLowPrecisionParametersAndMixedDevices) {
  const Device d = Cpu();
  auto h = testing::MakeTensor(d, {1}, {1}, DType::kBF16);
  ASSERT_TRUE(h.set_requires_grad(true).ok());
  h.set_grad(testing::MakeTensor(d, {1}, {1}, DType::kBF16));
  SGD sgd({h}, {.lr = 0.1});
  EXPECT_THAT(sgd.step().message(), HasSubstr("must be f32 master weights"));
  auto a = testing::MakeTensor(d, {1}, {1});
  auto b = testing::MakeTensor(testing::ReferenceDevice(), {1}, {1});
  SGD mixed({a, b}, {.lr = 0.1});
  EXPECT_THAT(mixed.step().message(), HasSubstr("parameters on two devices"));
}

}  // namespace
}  // namespace mixrt
