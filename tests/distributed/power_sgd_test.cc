// DistributedDataParallel's PowerSGD hook under mpirun (2 ranks, and 1),
// against the gradient one process computes on the whole batch (the plain
// all-reduce's result, up to f32 summation order), computed on each rank
// itself as the reference.
#include "core/distributed/power_sgd.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <vector>

#include "core/amp/grad_scaler/grad_scaler.h"
#include "core/distributed/distributed_data_parallel.h"
#include "core/functional/ops.h"
#include "core/nn/module.h"
#include "core/optim/optimizer.h"
#include "core/tensor/factories.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/distributed/mpi_group.h"
#include "tests/testing/test_plugins.h"

namespace mixrt {
namespace {

using distributed::DistributedDataParallel;
using distributed::DistributedDataParallelOptions;
using distributed::PowerSgdOptions;
using testing::CpuDevice;
using testing::Group;

constexpr int64_t kGlobalBatch = 16;

// Weights [32, 16], [32, 32], [4, 32]: compressed at rank 1 (their factors
// are 3-6% of them); biases: sent as they are.
std::shared_ptr<nn::Sequential> Model(const Device& device = CpuDevice()) {
  Generator g(1);
  return *nn::MLP({16, 32, 32, 4}, device, &g);
}

struct Batch {
  Tensor x, y;
};

Batch GlobalBatch(int step, const Device& device = CpuDevice()) {
  Generator g(500 + step);
  return {*randn({kGlobalBatch, 16}, DType::kF32, device, 0, 1, &g),
          *randn({kGlobalBatch, 4}, DType::kF32, device, 0, 1, &g)};
}

Batch Shard(const Batch& b) {
  const int64_t per = kGlobalBatch / Group()->world_size();
  const int64_t at = per * Group()->rank();
  return {*b.x.slice(0, at, at + per), *b.y.slice(0, at, at + per)};
}

// The gradients of the mean squared error on `batch`, per parameter.
std::vector<std::vector<float>> Gradients(nn::Module& model,
                                          const Batch& batch) {
  for (Tensor& p : model.parameters()) p.set_grad(Tensor());
  EXPECT_TRUE((*mse_loss(*model.forward(batch.x), batch.y)).backward().ok());
  std::vector<std::vector<float>> grads;
  for (const Tensor& p : model.parameters()) {
    grads.push_back(*p.grad().to_float_vector());
  }
  return grads;
}

std::shared_ptr<DistributedDataParallel> PowerSgdDdp(
    std::shared_ptr<nn::Module> model, PowerSgdOptions power_sgd) {
  DistributedDataParallelOptions o;
  o.comm_hook = distributed::CommHook::kPowerSgd;
  o.power_sgd = power_sgd;
  return *DistributedDataParallel::Create(std::move(model), Group(), o);
}

double Norm(const std::vector<float>& v) {
  double s = 0;
  for (float x : v) s += double{x} * x;
  return std::sqrt(s);
}

double Distance(const std::vector<float>& a, const std::vector<float>& b) {
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    s += (double{a[i]} - b[i]) * (double{a[i]} - b[i]);
  }
  return std::sqrt(s);
}

TEST(PowerSgdTest, OrthogonalizeColumnsIsGramSchmidt) {
  // Columns (3, 4, 0) and (1, 1, 1), row-major [3, 2].
  std::vector<float> m = {3, 1, 4, 1, 0, 1};
  distributed::OrthogonalizeColumns(m, 3, 2, 0);
  // First: (0.6, 0.8, 0). Second: (1,1,1) - 1.4 (0.6, 0.8, 0) =
  // (0.16, -0.12, 1), then normalized by its norm sqrt(1.04).
  const double n = std::sqrt(1.04);
  const std::vector<double> want = {0.6, 0.16 / n, 0.8, -0.12 / n, 0, 1 / n};
  for (size_t i = 0; i < m.size(); ++i) EXPECT_NEAR(m[i], want[i], 1e-6);
  // A zero column stays zero (PyTorch would divide by zero).
  std::vector<float> zero = {0, 2, 0, 0};
  distributed::OrthogonalizeColumns(zero, 2, 2, 0);
  EXPECT_EQ(zero, (std::vector<float>{0, 1, 0, 0}));
  // Epsilon joins the norm.
  std::vector<float> one = {2, 0};
  distributed::OrthogonalizeColumns(one, 2, 1, 2);
  EXPECT_FLOAT_EQ(one[0], 0.5f);
}

TEST(PowerSgdTest, BackwardsBeforeTheStartAreThePlainAllReduce) {
  PowerSgdOptions o;
  o.start_powerSGD_iter = 3;
  auto plain = *DistributedDataParallel::Create(Model(), Group());
  auto hooked = PowerSgdDdp(Model(), o);
  // As PyTorch's: backwards 0, 1, 2 (iter < start_powerSGD_iter) plain.
  for (int step = 0; step < 4; ++step) {
    const Batch batch = Shard(GlobalBatch(step));
    const auto want = Gradients(*plain, batch);
    const auto got = Gradients(*hooked, batch);
    if (step < 3) {
      EXPECT_EQ(got, want) << "step " << step;
    } else {
      EXPECT_NE(got, want) << "step " << step << " was not compressed";
    }
  }
  EXPECT_EQ(hooked->power_sgd_hook()->iter(), 4);
}

// At full rank (and compressing everything) the factors span each
// gradient, so P Q^T is the averaged gradient itself: every step of the
// pipeline (P summed, orthogonalized, Q averaged, the residual) is checked
// against one process's whole-batch gradient. Tolerance: Gram-Schmidt of
// a [32, 16] factor in f32, 1e-4 of the gradient's norm.
TEST(PowerSgdTest, AtFullRankTheGradientsAreTheAveragedOnes) {
  PowerSgdOptions o;
  o.matrix_approximation_rank = 64;
  o.min_compression_rate = 0;
  o.start_powerSGD_iter = 2;
  // The hook's matmuls, copies and random starts on either plugin.
  for (const Device& device : {CpuDevice(), testing::ReferenceDevice()}) {
    auto reference = Model(device);
    auto ddp = PowerSgdDdp(Model(device), o);
    for (int step = 0; step < 5; ++step) {
      const Batch batch = GlobalBatch(step, device);
      const auto want = Gradients(*reference, batch);
      const auto got = Gradients(*ddp, Shard(batch));
      for (size_t i = 0; i < want.size(); ++i) {
        EXPECT_LE(Distance(got[i], want[i]), 1e-4 * Norm(want[i]))
            << device.ToString() << ", step " << step << ", parameter " << i;
      }
    }
    // Everything went compressed: a factor pair per tensor.
    EXPECT_GT(ddp->power_sgd_hook()->numel_after_compression(),
              ddp->power_sgd_hook()->numel_before_compression());
  }
}

// At rank 1 a weight's gradient becomes u u^T G: G (the averaged
// gradient) projected on one direction u, the normalized P. So the result
// has rank 1, and what it leaves out of G is orthogonal to u. The biases
// are not worth compressing and arrive averaged.
TEST(PowerSgdTest, AtRankOneEachWeightIsProjectedOnOneDirection) {
  PowerSgdOptions o;
  o.start_powerSGD_iter = 2;
  auto reference = Model();
  auto ddp = PowerSgdDdp(Model(), o);
  const std::vector<std::vector<int64_t>> shapes = {{32, 16}, {32},    {32, 32},
                                                    {32},     {4, 32}, {4}};
  for (int step = 0; step < 3; ++step) {
    const Batch batch = GlobalBatch(step);
    const auto want = Gradients(*reference, batch);
    const auto got = Gradients(*ddp, Shard(batch));
    ASSERT_EQ(want.size(), shapes.size());
    for (size_t i = 0; i < want.size(); ++i) {
      const double norm = Norm(want[i]);
      if (step < 2 || shapes[i].size() == 1) {
        EXPECT_LE(Distance(got[i], want[i]), 1e-6 * norm) << i;
        continue;
      }
      const int64_t rows = shapes[i][0], cols = shapes[i][1];
      // u: the result's largest column, normalized.
      int64_t best = 0;
      double best_norm = 0;
      for (int64_t c = 0; c < cols; ++c) {
        double s = 0;
        for (int64_t r = 0; r < rows; ++r) {
          s += double{got[i][r * cols + c]} * got[i][r * cols + c];
        }
        if (s > best_norm) best_norm = s, best = c;
      }
      ASSERT_GT(best_norm, 0) << i;
      std::vector<double> u(rows);
      for (int64_t r = 0; r < rows; ++r) {
        u[r] = got[i][r * cols + best] / std::sqrt(best_norm);
      }
      // u u^T G against the result.
      double worst = 0;
      for (int64_t c = 0; c < cols; ++c) {
        double dot = 0;
        for (int64_t r = 0; r < rows; ++r) dot += u[r] * want[i][r * cols + c];
        for (int64_t r = 0; r < rows; ++r) {
          worst = std::max(worst, std::abs(u[r] * dot - got[i][r * cols + c]));
        }
      }
      EXPECT_LE(worst, 1e-5 * norm) << "step " << step << ", weight " << i;
      // And it is an approximation, not G.
      EXPECT_GT(Distance(got[i], want[i]), 0.05 * norm) << i;
    }
  }
}

// Error feedback: with the same gradient G every step, what is left out
// one step goes into the next, so the mean of the applied gradients
// approaches G (the sum telescopes: K G minus the last residual). Without
// it, every step applies about the same rank-1 part of G.
TEST(PowerSgdTest, ErrorFeedbackMakesTheMeanGradientConverge) {
  for (bool feedback : {true, false}) {
    PowerSgdOptions o;
    o.start_powerSGD_iter = 2;
    o.use_error_feedback = feedback;
    auto reference = Model();
    auto ddp = PowerSgdDdp(Model(), o);
    const Batch batch = GlobalBatch(0);
    const auto want = Gradients(*reference, batch);
    constexpr int kSteps = 200;
    std::vector<std::vector<double>> sum(want.size());
    for (size_t i = 0; i < want.size(); ++i) sum[i].assign(want[i].size(), 0);
    for (int step = 0; step < 2 + kSteps; ++step) {
      const auto got = Gradients(*ddp, Shard(batch));
      if (step < 2) continue;
      for (size_t i = 0; i < got.size(); ++i) {
        for (size_t k = 0; k < got[i].size(); ++k) sum[i][k] += got[i][k];
      }
    }
    // The [32, 32] weight: far from rank 1.
    std::vector<float> mean(want[2].size());
    for (size_t k = 0; k < mean.size(); ++k) mean[k] = sum[2][k] / kSteps;
    const double relative = Distance(mean, want[2]) / Norm(want[2]);
    std::printf("error feedback %s: mean gradient %.4f of |G| from G\n",
                feedback ? "on" : "off", relative);
    if (feedback) {
      EXPECT_LT(relative, 0.1);
    } else {
      EXPECT_GT(relative, 0.3);
    }
  }
}

// An inf in one rank's batch at a PowerSGD step reaches every rank's
// factors: every GradScaler skips that step, and the next steps are
// finite again (the residual and the warm-start Q were not taken from it).
TEST(PowerSgdTest, AnInfOnOneRankSkipsEveryRankAndDoesNotLinger) {
  PowerSgdOptions o;
  o.start_powerSGD_iter = 2;
  auto replica = Model();
  auto ddp = PowerSgdDdp(replica, o);
  SgdOptions so;
  so.lr = 0.05;
  auto opt = *SGD::Create(replica->parameters(), so);
  GradScaler scaler(CpuDevice());
  for (int step = 0; step < 6; ++step) {
    Batch batch = Shard(GlobalBatch(step));
    if (step == 3 && Group()->rank() == Group()->world_size() - 1) {
      batch.x = *full({batch.x.shape()[0], 16},
                      std::numeric_limits<double>::infinity(), DType::kF32,
                      CpuDevice());
    }
    opt->zero_grad();
    Tensor loss = *mse_loss(*ddp->forward(batch.x), batch.y);
    ASSERT_TRUE((*scaler.scale(loss)).backward().ok());
    ASSERT_TRUE(scaler.step(*opt).ok());
    ASSERT_TRUE(scaler.update().ok());
    EXPECT_EQ(*scaler.last_step_skipped(), step == 3) << "step " << step;
    for (const Tensor& p : replica->parameters()) {
      // Named: a range-for over *p.to_float_vector() would iterate a
      // destroyed temporary.
      const std::vector<float> values = *p.to_float_vector();
      for (float v : values) {
        ASSERT_TRUE(std::isfinite(v)) << "step " << step;
      }
    }
  }
}

TEST(PowerSgdTest, OnlyTheFactorsAndSmallTensorsTravel) {
  PowerSgdOptions o;
  o.start_powerSGD_iter = 2;
  auto ddp = PowerSgdDdp(Model(), o);
  for (int step = 0; step < 3; ++step) {
    Gradients(*ddp, Shard(GlobalBatch(step)));
  }
  // Rank 1 factors: (32 + 16) + (32 + 32) + (4 + 32) floats; biases
  // 32 + 32 + 4; against 1860 floats uncompressed.
  EXPECT_EQ(ddp->last_stats().bytes, 4 * (48 + 64 + 36 + 68));
  EXPECT_EQ(ddp->power_sgd_hook()->numel_before_compression(),
            16 * 32 + 32 + 32 * 32 + 32 + 32 * 4 + 4);
}

TEST(PowerSgdTest, BadStatesAndLateRegistrationAreRefused) {
  PowerSgdOptions early;
  early.start_powerSGD_iter = 1;
  DistributedDataParallelOptions o;
  o.comm_hook = distributed::CommHook::kPowerSgd;
  o.power_sgd = early;
  EXPECT_THAT(
      DistributedDataParallel::Create(Model(), Group(), o).status().message(),
      ::testing::HasSubstr("start_powerSGD_iter must be > 1"));
  PowerSgdOptions rank0;
  rank0.matrix_approximation_rank = 0;
  auto ddp = *DistributedDataParallel::Create(Model(), Group());
  EXPECT_THAT(ddp->register_comm_hook(rank0).message(),
              ::testing::HasSubstr("matrix_approximation_rank"));
  Gradients(*ddp, Shard(GlobalBatch(0)));
  EXPECT_THAT(ddp->register_comm_hook(PowerSgdOptions{}).message(),
              ::testing::HasSubstr("before the first backward"));
}

}  // namespace
}  // namespace mixrt
