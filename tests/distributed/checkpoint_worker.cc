// Saves a DDP run's checkpoint on one number of ranks and resumes it on
// another (checkpoint_mpi_test.sh):
//   checkpoint_worker save DIR    trains 12 steps, checkpoint after 6,
//                                 rank 0 writes the final parameters;
//   checkpoint_worker resume DIR  loads the checkpoint, trains steps 6-11
//                                 and compares with the saved final ones.
// Every rank's shard comes from a DistributedSampler and the global batch
// is 16 whatever the world size, so both runs see the same global batches.
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>

#include "absl/status/status.h"
#include "core/distributed/distributed_checkpoint.h"
#include "core/distributed/distributed_data_parallel.h"
#include "core/distributed/distributed_sampler.h"
#include "core/functional/ops.h"
#include "core/nn/module.h"
#include "core/optim/optimizer.h"
#include "core/tensor/factories.h"
#include "mixrt/status_macros.h"
#include "tests/testing/test_plugins.h"

namespace mixrt {
namespace {

constexpr int64_t kDataset = 64, kGlobalBatch = 16;
constexpr int kSteps = 12, kSaveAt = 6;

absl::Status Main(const std::string& mode, const std::string& dir) {
  MIXRT_ASSIGN_OR_RETURN(auto group, distributed::ProcessGroup::Create());
  const Device device = testing::CpuDevice();
  Generator data_gen(11);
  MIXRT_ASSIGN_OR_RETURN(
      Tensor data, randn({kDataset, 8}, DType::kF32, device, 0, 1, &data_gen));
  MIXRT_ASSIGN_OR_RETURN(Tensor labels, randn({kDataset, 3}, DType::kF32,
                                              device, 0, 1, &data_gen));
  MIXRT_ASSIGN_OR_RETURN(std::vector<float> xs, data.to_float_vector());
  MIXRT_ASSIGN_OR_RETURN(std::vector<float> ys, labels.to_float_vector());
  Generator init(1);
  MIXRT_ASSIGN_OR_RETURN(auto model, nn::MLP({8, 32, 3}, device, &init));
  MIXRT_ASSIGN_OR_RETURN(
      auto ddp, distributed::DistributedDataParallel::Create(model, group));
  MIXRT_ASSIGN_OR_RETURN(auto opt,
                         AdamW::Create(model->parameters(), {.lr = 1e-2}));
  const int world = group->world_size();
  MIXRT_ASSIGN_OR_RETURN(auto sampler,
                         distributed::DistributedSampler::Create(
                             kDataset, world, group->rank(), {.seed = 3}));
  const int64_t per_rank = kGlobalBatch / world;

  int first = 0;
  TrainingState state{model.get(), opt.get(), nullptr, nullptr, 0};
  if (mode == "resume") {
    MIXRT_ASSIGN_OR_RETURN(
        int saved_world,
        distributed::LoadDistributedCheckpoint(*group, dir + "/ckpt", state));
    first = static_cast<int>(state.step);
    std::printf("rank %d: resumed at step %d of a %d-rank run on %d ranks\n",
                group->rank(), first, saved_world, world);
  }
  for (int step = first; step < kSteps; ++step) {
    if (mode == "save" && step == kSaveAt) {
      state.step = step;
      MIXRT_RETURN_IF_ERROR(
          distributed::SaveDistributedCheckpoint(*group, dir + "/ckpt", state));
    }
    const int64_t per_epoch = kDataset / kGlobalBatch;
    sampler.set_epoch(step / per_epoch);
    const std::vector<int64_t> mine = sampler.indices();
    std::vector<float> bx, by;
    for (int64_t i = 0; i < per_rank; ++i) {
      const int64_t row = mine[(step % per_epoch) * per_rank + i];
      bx.insert(bx.end(), xs.begin() + row * 8, xs.begin() + row * 8 + 8);
      by.insert(by.end(), ys.begin() + row * 3, ys.begin() + row * 3 + 3);
    }
    MIXRT_ASSIGN_OR_RETURN(Tensor x,
                           from_floats(bx, {per_rank, 8}, DType::kF32, device));
    MIXRT_ASSIGN_OR_RETURN(Tensor y,
                           from_floats(by, {per_rank, 3}, DType::kF32, device));
    opt->zero_grad();
    MIXRT_ASSIGN_OR_RETURN(Tensor out, ddp->forward(x));
    MIXRT_ASSIGN_OR_RETURN(Tensor loss, mse_loss(out, y));
    MIXRT_RETURN_IF_ERROR(loss.backward());
    MIXRT_RETURN_IF_ERROR(opt->step());
  }
  const std::string final_path = dir + "/final";
  if (mode == "save") {
    TrainingState done{model.get(), nullptr, nullptr, nullptr, kSteps};
    return distributed::SaveDistributedCheckpoint(*group, final_path, done);
  }
  Generator other(2);
  MIXRT_ASSIGN_OR_RETURN(auto expected, nn::MLP({8, 32, 3}, device, &other));
  TrainingState want{expected.get(), nullptr, nullptr, nullptr, 0};
  MIXRT_RETURN_IF_ERROR(LoadTrainingCheckpoint(final_path, want));
  double worst = 0;
  for (size_t i = 0; i < model->parameters().size(); ++i) {
    MIXRT_ASSIGN_OR_RETURN(std::vector<float> a,
                           model->parameters()[i].to_float_vector());
    MIXRT_ASSIGN_OR_RETURN(std::vector<float> b,
                           expected->parameters()[i].to_float_vector());
    for (size_t k = 0; k < a.size(); ++k) {
      worst = std::max(
          worst, std::abs(double{a[k]} - b[k]) / (1 + std::abs(double{b[k]})));
    }
  }
  std::printf("rank %d: max relative difference to the uninterrupted run: %g\n",
              group->rank(), worst);
  // f32 reduction order differs between world sizes (8 + 8 rows averaged
  // vs 16 summed): a few ulps per step, amplified by Adam's normalization
  // for small second moments; 1e-5 relative over 6 steps.
  if (!(worst <= 1e-5)) {
    return absl::InternalError("the resumed run diverged from the saved one");
  }
  return absl::OkStatus();
}

}  // namespace
}  // namespace mixrt

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: checkpoint_worker save|resume DIR\n");
    return 2;
  }
  const absl::Status s = mixrt::Main(argv[1], argv[2]);
  if (!s.ok()) {
    std::fprintf(stderr, "checkpoint_worker: %s\n", s.ToString().c_str());
    return 1;
  }
  return 0;
}
