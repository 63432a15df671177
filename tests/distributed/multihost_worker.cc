// One data-parallel training run for multihost_mpi_test.sh, the same
// program on one host (2 ranks) and on two hosts (1 rank each, over TCP):
// the recipe MLP (3 Linear layers, AdamW; width shrunk for CI) under bf16
// autocast with the GradScaler and the bf16 compression hook, and a small
// GPT with dropout in f32. Every rank trains on batches of its own; each
// prints its host and a hash of every final parameter's bytes, which the
// test compares across the two runs and the ranks.
//   multihost_worker [STEPS]
#include <unistd.h>

#include <cinttypes>
#include <cstdio>
#include <string>

#include "absl/status/status.h"
#include "core/amp/autocast/autocast.h"
#include "core/amp/grad_scaler/grad_scaler.h"
#include "core/distributed/distributed_data_parallel.h"
#include "core/functional/ops.h"
#include "core/nn/module.h"
#include "core/nn/transformer.h"
#include "core/optim/optimizer.h"
#include "core/tensor/factories.h"
#include "mixrt/status_macros.h"
#include "tests/testing/test_plugins.h"

namespace mixrt {
namespace {

// FNV-1a over the bytes of every parameter, in order.
absl::StatusOr<uint64_t> HashParameters(nn::Module& model) {
  uint64_t h = 1469598103934665603ull;
  for (const Tensor& p : model.parameters()) {
    MIXRT_ASSIGN_OR_RETURN(std::vector<uint8_t> bytes, p.to_bytes());
    for (uint8_t b : bytes) h = (h ^ b) * 1099511628211ull;
  }
  return h;
}

absl::StatusOr<uint64_t> TrainMlp(
    const std::shared_ptr<distributed::ProcessGroup>& group, int steps) {
  const Device device = testing::CpuDevice();
  Generator init(1);
  MIXRT_ASSIGN_OR_RETURN(auto model,
                         nn::MLP({256, 256, 256, 16}, device, &init));
  MIXRT_ASSIGN_OR_RETURN(
      auto ddp, distributed::DistributedDataParallel::Create(model, group));
  MIXRT_RETURN_IF_ERROR(
      ddp->register_comm_hook(distributed::CommHook::kBf16Compress));
  MIXRT_ASSIGN_OR_RETURN(auto opt,
                         AdamW::Create(model->parameters(), {.lr = 1e-3}));
  GradScaler scaler(device);
  Generator data(100 + group->rank());
  for (int step = 0; step < steps; ++step) {
    MIXRT_ASSIGN_OR_RETURN(Tensor x,
                           randn({32, 256}, DType::kF32, device, 0, 1, &data));
    MIXRT_ASSIGN_OR_RETURN(Tensor y,
                           randn({32, 16}, DType::kF32, device, 0, 1, &data));
    Tensor loss;
    {
      AutocastGuard autocast(device.type(), DType::kBF16);
      MIXRT_ASSIGN_OR_RETURN(Tensor out, ddp->forward(x));
      MIXRT_ASSIGN_OR_RETURN(loss, mse_loss(out, y));
    }
    MIXRT_ASSIGN_OR_RETURN(Tensor scaled, scaler.scale(loss));
    MIXRT_RETURN_IF_ERROR(scaled.backward());
    MIXRT_RETURN_IF_ERROR(scaler.step(*opt));
    MIXRT_RETURN_IF_ERROR(scaler.update());
    opt->zero_grad();
  }
  return HashParameters(*model);
}

absl::StatusOr<uint64_t> TrainGpt(
    const std::shared_ptr<distributed::ProcessGroup>& group, int steps) {
  const Device device = testing::CpuDevice();
  Generator init(2);
  MIXRT_ASSIGN_OR_RETURN(auto gpt, nn::GPT::Create({.vocab_size = 32,
                                                    .context = 16,
                                                    .width = 32,
                                                    .heads = 2,
                                                    .layers = 2,
                                                    .dropout = 0.1},
                                                   device, &init));
  MIXRT_ASSIGN_OR_RETURN(
      auto ddp, distributed::DistributedDataParallel::Create(gpt, group));
  MIXRT_ASSIGN_OR_RETURN(auto opt,
                         AdamW::Create(gpt->parameters(), {.lr = 3e-3}));
  manual_seed(7 + group->rank());  // Each rank's own dropout masks.
  for (int step = 0; step < steps; ++step) {
    std::vector<int64_t> tokens(4 * 17);
    for (size_t i = 0; i < tokens.size(); ++i) {
      tokens[i] =
          static_cast<int64_t>((i * 7 + step * 3 + group->rank() * 5) % 32);
    }
    MIXRT_ASSIGN_OR_RETURN(Tensor all,
                           from_ints(tokens, {4, 17}, DType::kI64, device));
    MIXRT_ASSIGN_OR_RETURN(Tensor x, all.slice(1, 0, 16));
    MIXRT_ASSIGN_OR_RETURN(Tensor y, all.slice(1, 1, 17));
    MIXRT_ASSIGN_OR_RETURN(x, x.contiguous());
    MIXRT_ASSIGN_OR_RETURN(y, y.contiguous());
    MIXRT_ASSIGN_OR_RETURN(Tensor logits, ddp->forward(x));
    MIXRT_ASSIGN_OR_RETURN(Tensor flat, reshape(logits, {64, 32}));
    MIXRT_ASSIGN_OR_RETURN(Tensor targets, y.reshape({64}));
    MIXRT_ASSIGN_OR_RETURN(Tensor loss, cross_entropy(flat, targets));
    MIXRT_RETURN_IF_ERROR(loss.backward());
    MIXRT_RETURN_IF_ERROR(opt->step());
    opt->zero_grad();
  }
  return HashParameters(*gpt);
}

absl::Status Main(int steps) {
  MIXRT_ASSIGN_OR_RETURN(auto group, distributed::ProcessGroup::Create());
  MIXRT_ASSIGN_OR_RETURN(uint64_t mlp, TrainMlp(group, steps));
  MIXRT_ASSIGN_OR_RETURN(uint64_t gpt, TrainGpt(group, steps));
  char host[256] = {};
  gethostname(host, sizeof(host) - 1);
  std::printf("rank %d of %d on %s: mlp %016" PRIx64 " gpt %016" PRIx64 "\n",
              group->rank(), group->world_size(), host, mlp, gpt);
  return absl::OkStatus();
}

}  // namespace
}  // namespace mixrt

int main(int argc, char** argv) {
  const int steps = argc > 1 ? std::atoi(argv[1]) : 4;
  const absl::Status status = mixrt::Main(steps);
  if (!status.ok()) {
    std::fprintf(stderr, "multihost_worker: %s\n", status.ToString().c_str());
    return 1;
  }
  return 0;
}
