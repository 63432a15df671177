// Gradient checkpointing: a GPT with dropout trained with and without
// per-block checkpointing gives bit-identical losses and gradients, in f32
// and under bf16 autocast (same kernels, same order, same dropout masks),
// leaves the generators where the plain run leaves them, and holds less
// memory at its peak.
#include "core/functional/checkpoint.h"

#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/amp/autocast/autocast.h"
#include "core/autograd/grad_mode.h"
#include "core/functional/ops.h"
#include "core/nn/transformer.h"
#include "core/tensor/factories.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "mixrt/status_macros.h"
#include "tests/testing/test_plugins.h"

namespace mixrt {
namespace {

struct StepResult {
  double loss = 0;
  std::map<std::string, std::vector<double>> grads;
  uint64_t generator_offset = 0;
  uint64_t peak_bytes = 0;
};

StepResult TrainStep(bool checkpointing, bool autocast) {
  const Device d = testing::ReferenceDevice();
  Generator gen(5);
  auto gpt = *nn::GPT::Create({.vocab_size = 7,
                               .context = 6,
                               .width = 8,
                               .heads = 2,
                               .layers = 3,
                               .dropout = 0.2,
                               .checkpoint = checkpointing},
                              d, &gen);
  std::vector<int64_t> in, target;
  for (int i = 0; i < 12; ++i) {
    in.push_back((3 * i + 1) % 7);
    target.push_back((3 * i + 4) % 7);
  }
  Tensor x = *from_ints(in, {2, 6}, DType::kI64, d);
  Tensor y = *from_ints(target, {12}, DType::kI64, d);
  CachingAllocator& allocator = d.backend()->allocator(d.index());
  allocator.ResetPeak();
  StepResult r;
  absl::StatusOr<Tensor> loss;
  {
    std::optional<AutocastGuard> guard;
    if (autocast) guard.emplace("cpu", DType::kBF16);
    absl::StatusOr<Tensor> logits = gpt->forward(x);
    EXPECT_TRUE(logits.ok()) << logits.status();
    loss = cross_entropy(*reshape(*logits, {12, 7}), y);
  }
  EXPECT_TRUE(loss.ok()) << loss.status();
  r.loss = *loss->item();
  EXPECT_TRUE(loss->backward().ok());
  r.peak_bytes = allocator.stats().peak_bytes_in_use;
  for (const auto& [name, p] : gpt->named_parameters()) {
    EXPECT_TRUE(p.grad().defined()) << name << " got no gradient";
    if (p.grad().defined()) r.grads[name] = *p.grad().to_double_vector();
  }
  r.generator_offset = gen.offset();
  return r;
}

TEST(Checkpoint, GradientsAreBitIdenticalInF32AndUnderAutocast) {
  for (bool autocast : {false, true}) {
    const StepResult plain = TrainStep(false, autocast);
    const StepResult checkpointed = TrainStep(true, autocast);
    EXPECT_EQ(plain.loss, checkpointed.loss) << "autocast " << autocast;
    ASSERT_EQ(plain.grads.size(), checkpointed.grads.size());
    for (const auto& [name, g] : plain.grads) {
      EXPECT_EQ(g, checkpointed.grads.at(name))
          << name << (autocast ? " under bf16 autocast" : " in f32");
    }
    EXPECT_EQ(plain.generator_offset, checkpointed.generator_offset)
        << "the recompute shifted later random draws";
  }
}

TEST(Checkpoint, HoldsLessAtItsPeak) {
  const StepResult plain = TrainStep(false, false);
  const StepResult checkpointed = TrainStep(true, false);
  EXPECT_LT(checkpointed.peak_bytes, plain.peak_bytes);
}

// preserve_rng_state (torch's): on, the recompute's dropout mask is the
// forward's (the gradient of sum(dropout(x)) at x = 1 is the output) and
// the generator ends where the forward left it; off, the recompute draws
// a mask of its own and the generator moves on.
TEST(Checkpoint, PreserveRngStateOffRedrawsTheMask) {
  const Device d = testing::ReferenceDevice();
  for (bool preserve : {true, false}) {
    Generator gen(9);
    Tensor x = *full({64}, 1.0, DType::kF32, d);
    ASSERT_TRUE(x.set_requires_grad(true).ok());
    absl::StatusOr<std::vector<Tensor>> out = checkpoint(
        [&gen](const std::vector<Tensor>& in)
            -> absl::StatusOr<std::vector<Tensor>> {
          MIXRT_ASSIGN_OR_RETURN(Tensor y, dropout(in[0], 0.5, &gen));
          return std::vector<Tensor>{y};
        },
        {x}, {.generators = {&gen}, .preserve_rng_state = preserve});
    ASSERT_TRUE(out.ok()) << out.status();
    const uint64_t after_forward = gen.offset();
    ASSERT_TRUE(sum((*out)[0])->backward().ok());
    const std::vector<double> y = *(*out)[0].to_double_vector();
    const std::vector<double> dx = *x.grad().to_double_vector();
    if (preserve) {
      EXPECT_EQ(dx, y) << "the recompute used another mask";
      EXPECT_EQ(gen.offset(), after_forward);
    } else {
      EXPECT_NE(dx, y) << "64 fresh draws gave the forward's mask";
      EXPECT_GT(gen.offset(), after_forward);
    }
  }
}

// Data in, a parameter inside: only the non-reentrant form (torch's
// use_reentrant=False) gives the parameter its gradient, the one an
// uncheckpointed run gives: d/dw sum((w x)^2) = 2 w x^2.
TEST(Checkpoint, NonReentrantReachesParametersWhenNoInputNeedsGrad) {
  const Device d = testing::ReferenceDevice();
  for (bool reentrant : {true, false}) {
    Tensor w = *full({2}, 0.5, DType::kF32, d);
    ASSERT_TRUE(w.set_requires_grad(true).ok());
    Tensor x = *from_floats({1, 3}, {2}, DType::kF32, d);  // Data.
    auto region = [w](const std::vector<Tensor>& in)
        -> absl::StatusOr<std::vector<Tensor>> {
      MIXRT_ASSIGN_OR_RETURN(Tensor wx, mul(in[0], w));
      MIXRT_ASSIGN_OR_RETURN(Tensor y, mul(wx, wx));
      return std::vector<Tensor>{y};
    };
    absl::StatusOr<std::vector<Tensor>> out =
        checkpoint(region, {x}, {.use_reentrant = reentrant});
    ASSERT_TRUE(out.ok()) << out.status();
    EXPECT_EQ((*out)[0].requires_grad(), !reentrant);
    if (reentrant) {
      EXPECT_FALSE(w.grad().defined());
      continue;
    }
    ASSERT_TRUE(sum((*out)[0])->backward().ok());
    ASSERT_TRUE(w.grad().defined());
    // 2 w x^2 = 2 * 0.5 * {1, 9}.
    EXPECT_EQ(*w.grad().to_double_vector(), (std::vector<double>{1, 9}));
  }
}

TEST(Checkpoint, WithoutGradRecordingItJustRuns) {
  const Device d = testing::ReferenceDevice();
  Tensor x = *full({2}, 3, DType::kF32, d);
  ASSERT_TRUE(x.set_requires_grad(true).ok());
  NoGradGuard no_grad;
  absl::StatusOr<std::vector<Tensor>> out = checkpoint(
      [](const std::vector<Tensor>& in) -> absl::StatusOr<std::vector<Tensor>> {
        MIXRT_ASSIGN_OR_RETURN(Tensor y, mul(in[0], in[0]));
        return std::vector<Tensor>{y};
      },
      {x});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(*(*out)[0].to_double_vector(), (std::vector<double>{9, 9}));
  EXPECT_FALSE((*out)[0].requires_grad());
}

}  // namespace
}  // namespace mixrt
