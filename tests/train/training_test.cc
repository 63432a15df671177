// End-to-end training on the CPU backend: the loss goes down; f32 and bf16
// autocast runs from one seed agree within bf16's tolerance; checkpoints
// resume to bit-identical parameters and refuse damaged files.
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iterator>

#include "absl/status/status.h"
#include "core/amp/autocast/autocast.h"
#include "core/amp/grad_scaler/grad_scaler.h"
#include "core/functional/ops.h"
#include "core/io/checkpoint.h"
#include "core/nn/module.h"
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
  static const Device d = [] {
    auto b = Registry::Global().Load(
        testing::RunfilePath("backends/cpu/libmixrt_cpu.so"));
    EXPECT_TRUE(b.ok()) << b.status();
    return Device(*b, 0);
  }();
  return d;
}

// A small regression task: y = tanh(x A) with a fixed random A.
struct Task {
  std::vector<Tensor> x, y;
};

Task MakeTask(const Device& d, int batches) {
  Generator g(11);
  Task t;
  auto a = randn({16, 8}, DType::kF32, d, 0, 0.5, &g);
  for (int i = 0; i < batches; ++i) {
    auto x = randn({32, 16}, DType::kF32, d, 0, 1, &g);
    t.x.push_back(*x);
    t.y.push_back(*tanh(*matmul(*x, *a)));
  }
  return t;
}

struct TrainingRun {
  std::shared_ptr<nn::Sequential> model;
  std::unique_ptr<SGD> opt;
  std::unique_ptr<GradScaler> scaler;
};

TrainingRun MakeRun(const Device& d, bool scaler_on) {
  Generator init(3);
  TrainingRun r;
  r.model = *nn::MLP({16, 32, 8}, d, &init);
  r.opt = std::make_unique<SGD>(r.model->parameters(),
                                SgdOptions{.lr = 0.1, .momentum = 0.9});
  r.scaler = std::make_unique<GradScaler>(
      d, GradScalerOptions{.init_scale = 256, .enabled = scaler_on});
  return r;
}

double TrainSteps(TrainingRun& r, const Task& task, int steps, int first,
                  std::optional<DType> autocast) {
  double loss_value = 0;
  for (int s = first; s < first + steps; ++s) {
    const size_t i = static_cast<size_t>(s) % task.x.size();
    Tensor loss;
    {
      AutocastGuard guard(
          "cpu", AutocastOptions{autocast, false, autocast.has_value(), true});
      loss = *mse_loss(*r.model->forward(task.x[i]), task.y[i]);
    }
    EXPECT_TRUE(r.scaler->scale(loss)->backward().ok());
    EXPECT_TRUE(r.scaler->step(*r.opt).ok());
    EXPECT_TRUE(r.scaler->update().ok());
    r.opt->zero_grad();
    loss_value = *loss.item();
  }
  return loss_value;
}

std::vector<std::vector<uint8_t>> Params(const TrainingRun& r) {
  std::vector<std::vector<uint8_t>> out;
  for (const Tensor& p : r.model->parameters()) out.push_back(*p.to_bytes());
  return out;
}

TEST(Training, LossDecreases) {
  const Device d = Cpu();
  const Task task = MakeTask(d, 4);
  TrainingRun r = MakeRun(d, false);
  const double first = TrainSteps(r, task, 1, 0, std::nullopt);
  const double last = TrainSteps(r, task, 60, 1, std::nullopt);
  EXPECT_LT(last, 0.5 * first) << "first " << first << ", last " << last;
}

TEST(Training, Bf16AutocastTracksF32FromTheSameSeed) {
  const Device d = Cpu();
  const Task task = MakeTask(d, 4);
  TrainingRun f32 = MakeRun(d, false), bf16 = MakeRun(d, true);
  const double a = TrainSteps(f32, task, 5, 0, std::nullopt);
  const double b = TrainSteps(bf16, task, 5, 0, DType::kBF16);
  // bf16 keeps 8 significant bits (relative 2^-8 per rounding); after a few
  // steps the losses agree to a few of those.
  EXPECT_NEAR(b, a, 0.03 * a);
  const auto pa = f32.model->parameters(), pb = bf16.model->parameters();
  for (size_t i = 0; i < pa.size(); ++i) {
    testing::ExpectClose(testing::Values(pb[i]), testing::Values(pa[i]), 0.05,
                         2e-3, absl::StrCat("parameter ", i));
  }
}

TEST(Training, CheckpointResumesToBitIdenticalParameters) {
  const Device d = Cpu();
  const Task task = MakeTask(d, 4);
  const std::string path = absl::StrCat(getenv("TEST_TMPDIR"), "/ckpt.bin");
  TrainingRun a = MakeRun(d, true);
  TrainSteps(a, task, 3, 0, DType::kBF16);
  TrainingState save{a.model.get(), a.opt.get(), a.scaler.get(), nullptr, 3};
  ASSERT_TRUE(SaveTrainingCheckpoint(path, save).ok());
  TrainSteps(a, task, 3, 3, DType::kBF16);

  TrainingRun b = MakeRun(d, true);
  Generator other(12345);  // Different init: overwritten by the load.
  b.model = *nn::MLP({16, 32, 8}, d, &other);
  b.opt = std::make_unique<SGD>(b.model->parameters(),
                                SgdOptions{.lr = 0.1, .momentum = 0.9});
  TrainingState load{b.model.get(), b.opt.get(), b.scaler.get(), nullptr, 0};
  ASSERT_TRUE(LoadTrainingCheckpoint(path, load).ok());
  EXPECT_EQ(load.step, 3);
  EXPECT_EQ(*b.scaler->get_scale(),
            *GradScaler(d, {.init_scale = 256}).get_scale());
  TrainSteps(b, task, 3, 3, DType::kBF16);
  EXPECT_EQ(Params(a), Params(b));
}

TEST(Training, DamagedOrMismatchedCheckpointsAreRefused) {
  const Device d = Cpu();
  const std::string path = absl::StrCat(getenv("TEST_TMPDIR"), "/good.bin");
  TrainingRun r = MakeRun(d, false);  // Scaler disabled: no scaler state saved.
  TrainingState state{r.model.get(), r.opt.get(), r.scaler.get(), nullptr, 7};
  ASSERT_TRUE(SaveTrainingCheckpoint(path, state).ok());
  std::ifstream in(path, std::ios::binary);
  const std::string good((std::istreambuf_iterator<char>(in)),
                         std::istreambuf_iterator<char>());
  auto write = [](const std::string& p, const std::string& data) {
    std::ofstream(p, std::ios::binary) << data;
  };
  const std::string bad = absl::StrCat(getenv("TEST_TMPDIR"), "/bad.bin");
  std::string flipped = good;
  flipped[flipped.size() / 2] ^= 0x10;
  write(bad, flipped);
  EXPECT_THAT(LoadCheckpoint(bad, d).status().message(), HasSubstr("CRC-32"));
  write(bad, good.substr(0, good.size() - 100));
  EXPECT_THAT(LoadCheckpoint(bad, d).status().message(),
              HasSubstr("truncated"));
  write(bad, "not a checkpoint at all, but long enough to have a header");
  EXPECT_THAT(LoadCheckpoint(bad, d).status().message(),
              HasSubstr("bad magic"));
  // A model of another shape: refused, naming the parameter, and unchanged.
  Generator g(1);
  auto other = *nn::MLP({16, 31, 8}, d, &g);
  const std::vector<uint8_t> before = *other->parameters()[0].to_bytes();
  TrainingState mismatch{other.get(), nullptr, nullptr, nullptr, 0};
  absl::Status s = LoadTrainingCheckpoint(path, mismatch);
  EXPECT_THAT(s.message(), HasSubstr("'0.weight' is f32 [32, 16] but the model "
                                     "has f32 [31, 16]"));
  EXPECT_EQ(*other->parameters()[0].to_bytes(), before);
  // A checkpoint without scaler state loads into a run with a scaler.
  TrainingRun with_scaler = MakeRun(d, true);
  TrainingState old{with_scaler.model.get(), with_scaler.opt.get(),
                    with_scaler.scaler.get(), nullptr, 0};
  ASSERT_TRUE(LoadTrainingCheckpoint(path, old).ok());
  EXPECT_EQ(old.step, 7);
  EXPECT_EQ(*with_scaler.scaler->get_scale(), 256);
}

}  // namespace
}  // namespace mixrt
