// ZeroRedundancyOptimizer (ZeRO stage 1) under mpirun: DDP with the
// sharded AdamW against DDP with an unsharded one on the same batches —
// parameters and the consolidated state equal bit for bit, each rank holds
// its shard's state only (about 1/N), a GradScaler's skipped step skips
// every shard, and a consolidated checkpoint resumes on this world size
// and as an unsharded AdamW.
#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/amp/autocast/autocast.h"
#include "core/amp/grad_scaler/grad_scaler.h"
#include "core/distributed/distributed_checkpoint.h"
#include "core/distributed/distributed_data_parallel.h"
#include "core/distributed/zero_redundancy_optimizer.h"
#include "core/functional/ops.h"
#include "core/nn/module.h"
#include "core/optim/lr_scheduler.h"
#include "core/optim/optimizer.h"
#include "core/tensor/factories.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/distributed/mpi_group.h"
#include "tests/testing/test_plugins.h"

namespace mixrt {
namespace {

using distributed::DistributedDataParallel;
using distributed::ZeroRedundancyOptimizer;
using testing::CpuDevice;
using testing::Group;

constexpr int64_t kBatch = 8;  // Per rank.

std::shared_ptr<nn::Sequential> Model() {
  Generator g(5);
  // Layers of different sizes, so the shards differ.
  return *nn::MLP({24, 64, 48, 6}, CpuDevice(), &g);
}

// Each rank's own batch of step `step`.
std::pair<Tensor, Tensor> Batch(int step) {
  Generator g(100 * step + Group()->rank());
  return {*randn({kBatch, 24}, DType::kF32, CpuDevice(), 0, 1, &g),
          *randn({kBatch, 6}, DType::kF32, CpuDevice(), 0, 1, &g)};
}

std::vector<std::vector<uint8_t>> Bytes(const std::vector<Tensor>& ts) {
  std::vector<std::vector<uint8_t>> out;
  for (const Tensor& t : ts) out.push_back(*t.to_bytes());
  return out;
}

std::map<std::string, std::vector<uint8_t>> StateBytes(const Optimizer& o) {
  std::map<std::string, std::vector<uint8_t>> out;
  for (const auto& [k, t] : o.state_dict()) out[k] = *t.to_bytes();
  return out;
}

// `steps` DDP steps of `model` with `opt` (under bf16 autocast and a
// GradScaler when `scaler`), a step-size schedule on it too.
void Train(nn::Module& model, Optimizer& opt, int first, int steps,
           GradScaler* scaler = nullptr) {
  auto ddp = *DistributedDataParallel::Create(
      std::shared_ptr<nn::Module>(&model, [](nn::Module*) {}), Group());
  for (int s = first; s < first + steps; ++s) {
    auto [x, y] = Batch(s);
    opt.zero_grad();
    Tensor loss;
    {
      std::optional<AutocastGuard> autocast;
      if (scaler != nullptr) autocast.emplace("cpu", DType::kBF16);
      loss = *mse_loss(*ddp->forward(x), y);
    }
    if (scaler != nullptr) {
      ASSERT_TRUE((*scaler->scale(loss)).backward().ok());
      ASSERT_TRUE(scaler->step(opt).ok());
      ASSERT_TRUE(scaler->update().ok());
    } else {
      ASSERT_TRUE(loss.backward().ok());
      ASSERT_TRUE(opt.step().ok());
    }
  }
}

const AdamWOptions kOptions = {.lr = 1e-2, .weight_decay = 0.05};

TEST(ZeroRedundancyOptimizer, StepsAsUnshardedAdamWBitForBit) {
  auto plain_model = Model();
  auto zero_model = Model();
  auto plain = *AdamW::Create(plain_model->parameters(), kOptions);
  auto zero = *ZeroRedundancyOptimizer::Create(zero_model->parameters(),
                                               Group(), kOptions);
  Train(*plain_model, *plain, 0, 6);
  Train(*zero_model, *zero, 0, 6);
  EXPECT_EQ(Bytes(zero_model->parameters()), Bytes(plain_model->parameters()));
  ASSERT_TRUE(zero->consolidate_state_dict(0).ok());
  if (Group()->rank() == 0) {
    EXPECT_EQ(StateBytes(*zero), StateBytes(*plain));
  }
}

// Each rank holds the moments of its own parameters only: the shards
// cover every parameter once, and the state per rank is about 1/N.
TEST(ZeroRedundancyOptimizer, EachRankHoldsItsShardsStateOnly) {
  auto model = Model();
  auto zero =
      *ZeroRedundancyOptimizer::Create(model->parameters(), Group(), kOptions);
  Train(*model, *zero, 0, 1);
  const int world = Group()->world_size();
  uint64_t total = 0;
  for (const Tensor& p : model->parameters()) {
    total += 2 * p.numel() * 4 + 4;  // exp_avg, exp_avg_sq, step.
  }
  const uint64_t mine = zero->state_bytes();
  const std::vector<float> value = {static_cast<float>(mine)};
  Tensor t = *from_floats(value, {1}, DType::kF32, CpuDevice());
  Tensor gathered = *zeros({world}, DType::kF32, CpuDevice());
  auto gather = Group()->AllGather(t, gathered);
  ASSERT_TRUE(gather.ok()) << gather.status();
  ASSERT_TRUE(gather->Wait().ok());
  double sum = 0, largest = 0;
  const std::vector<float> per_rank = *gathered.to_float_vector();
  for (float v : per_rank) {
    sum += v;
    largest = std::max<double>(largest, v);
  }
  EXPECT_EQ(sum, static_cast<double>(total));  // Every parameter once.
  if (world > 1) {
    // The largest layer (64 x 48 + 48 of 4,982 elements) sets the balance.
    EXPECT_LT(largest, 0.75 * static_cast<double>(total))
        << "rank " << Group()->rank() << " holds " << mine << " of " << total;
  }
}

// An inf in one rank's gradients skips the step on every rank (DDP's
// all-reduce spreads it), and every shard with it; then training goes on
// as the unsharded optimizer's.
TEST(ZeroRedundancyOptimizer, AGradScalerSkipSkipsEveryShard) {
  auto plain_model = Model();
  auto zero_model = Model();
  auto plain = *AdamW::Create(plain_model->parameters(), kOptions);
  auto zero = *ZeroRedundancyOptimizer::Create(zero_model->parameters(),
                                               Group(), kOptions);
  GradScalerOptions o;
  o.init_scale = 3e38;  // The first step overflows and is skipped.
  GradScaler s1(CpuDevice(), o), s2(CpuDevice(), o);
  Train(*plain_model, *plain, 0, 4, &s1);
  Train(*zero_model, *zero, 0, 4, &s2);
  EXPECT_EQ(Bytes(zero_model->parameters()), Bytes(plain_model->parameters()));
  EXPECT_EQ(*s1.get_scale(), *s2.get_scale());
  EXPECT_LT(*s1.get_scale(), 3e38) << "no step was skipped";
}

// A checkpoint of a sharded run holds the whole state (consolidated on
// rank 0): it resumes sharded on this world size and unsharded, both
// ending where the uninterrupted run ends.
TEST(ZeroRedundancyOptimizer, AConsolidatedCheckpointResumesShardedOrNot) {
  const std::string path = std::string(std::getenv("TEST_TMPDIR")) +
                           "/zero_ckpt_" +
                           std::to_string(Group()->world_size());
  auto model = Model();
  auto zero =
      *ZeroRedundancyOptimizer::Create(model->parameters(), Group(), kOptions);
  Train(*model, *zero, 0, 3);
  TrainingState state{model.get(), zero.get(), nullptr, nullptr, 3};
  ASSERT_TRUE(
      distributed::SaveDistributedCheckpoint(*Group(), path, state).ok());
  Train(*model, *zero, 3, 3);
  const auto want = Bytes(model->parameters());

  auto resumed_model = Model();
  auto resumed = *ZeroRedundancyOptimizer::Create(resumed_model->parameters(),
                                                  Group(), kOptions);
  TrainingState rs{resumed_model.get(), resumed.get(), nullptr, nullptr, 0};
  ASSERT_TRUE(distributed::LoadDistributedCheckpoint(*Group(), path, rs).ok());
  Train(*resumed_model, *resumed, 3, 3);
  EXPECT_EQ(Bytes(resumed_model->parameters()), want);

  auto plain_model = Model();
  auto plain = *AdamW::Create(plain_model->parameters(), kOptions);
  TrainingState ps{plain_model.get(), plain.get(), nullptr, nullptr, 0};
  ASSERT_TRUE(distributed::LoadDistributedCheckpoint(*Group(), path, ps).ok());
  Train(*plain_model, *plain, 3, 3);
  EXPECT_EQ(Bytes(plain_model->parameters()), want);
}

TEST(ZeroRedundancyOptimizer, BadArgumentsAreRefused) {
  EXPECT_FALSE(ZeroRedundancyOptimizer::Create({}, Group(), kOptions).ok());
  EXPECT_FALSE(
      ZeroRedundancyOptimizer::Create(Model()->parameters(), nullptr, kOptions)
          .ok());
  AdamWOptions bad = kOptions;
  bad.lr = -1;
  EXPECT_FALSE(
      ZeroRedundancyOptimizer::Create(Model()->parameters(), Group(), bad)
          .ok());
  auto zero = *ZeroRedundancyOptimizer::Create(Model()->parameters(), Group(),
                                               kOptions);
  EXPECT_FALSE(zero->consolidate_state_dict(Group()->world_size()).ok());
  std::map<std::string, Tensor> stray = {
      {"99.exp_avg", *zeros({1}, DType::kF32, CpuDevice())}};
  EXPECT_FALSE(zero->load_state_dict(stray).ok());
}

}  // namespace
}  // namespace mixrt
