// Data-parallel training and all-reduce figures, run under mpirun by
// ddp_benchmark.sh (which prints the ratios):
//   --mode=train      the recipe MLP (3 x Linear 4096, global batch 512)
//                     train step: ms/step, samples/s, peak memory, and how
//                     much of the gradient all-reduce backward hid;
//   --mode=allreduce  the ProcessGroup's all-reduce at 1-256 MiB
//                     (--allreduce_dtype=f32|bf16|f16).
// Medians of --steps timed steps after --warmup.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "core/bundled/bundled_plugins.h"
#include "mixrt/mixrt.h"

ABSL_FLAG(std::string, mode, "train", "train or allreduce");
ABSL_FLAG(std::string, allreduce_dtype, "f32",
          "allreduce mode: f32, bf16 or f16 (the comm hooks' wire dtypes).");
ABSL_FLAG(int, steps, 8, "Timed steps (train) or repetitions (allreduce).");
ABSL_FLAG(int, warmup, 2, "Untimed steps first.");
ABSL_FLAG(int64_t, width, 4096, "MLP width.");
ABSL_FLAG(int64_t, global_batch, 512, "Global batch (split over ranks).");
ABSL_FLAG(bool, amp, false, "bf16 autocast + GradScaler.");
ABSL_FLAG(std::string, optimizer, "sgd",
          "sgd (momentum), adamw, or zero (AdamW with its state sharded "
          "across ranks: ZeroRedundancyOptimizer); the state bytes per "
          "rank are printed.");
ABSL_FLAG(std::string, comm_hook, "",
          "DDP communication hook: bf16 or fp16 (compress the gradients on "
          "the wire, as PyTorch's bf16_compress_hook), powersgd (low-rank "
          "factors, from the first timed step); empty: f32.");
ABSL_FLAG(int, powersgd_rank, 4,
          "--comm_hook=powersgd: matrix_approximation_rank.");

namespace mixrt {
namespace {

using Clock = std::chrono::steady_clock;

double Ms(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

absl::StatusOr<std::unique_ptr<Optimizer>> MakeOptimizer(
    std::vector<Tensor> params,
    const std::shared_ptr<distributed::ProcessGroup>& group) {
  const std::string kind = absl::GetFlag(FLAGS_optimizer);
  if (kind == "sgd") {
    MIXRT_ASSIGN_OR_RETURN(
        auto sgd,
        SGD::Create(std::move(params), {.lr = 1e-3, .momentum = 0.9}));
    return std::unique_ptr<Optimizer>(std::move(sgd));
  }
  if (kind == "adamw") {
    MIXRT_ASSIGN_OR_RETURN(auto adamw,
                           AdamW::Create(std::move(params), {.lr = 1e-4}));
    return std::unique_ptr<Optimizer>(std::move(adamw));
  }
  if (kind == "zero") {
    MIXRT_ASSIGN_OR_RETURN(auto zero,
                           distributed::ZeroRedundancyOptimizer::Create(
                               std::move(params), group, {.lr = 1e-4}));
    return std::unique_ptr<Optimizer>(std::move(zero));
  }
  return absl::InvalidArgumentError(
      absl::StrCat("--optimizer is '", kind, "'; expected sgd, adamw or zero"));
}

// Bytes of the optimizer's state this rank holds.
uint64_t StateBytes(const Optimizer& opt) {
  if (const auto* zero =
          dynamic_cast<const distributed::ZeroRedundancyOptimizer*>(&opt)) {
    return zero->state_bytes();
  }
  uint64_t bytes = 0;
  for (const auto& [name, t] : opt.state_dict()) {
    bytes += static_cast<uint64_t>(t.numel()) * DTypeSize(t.dtype());
  }
  return bytes;
}

absl::Status Train(const Device& device,
                   const std::shared_ptr<distributed::ProcessGroup>& group) {
  const int world = group->world_size();
  const int64_t width = absl::GetFlag(FLAGS_width);
  const int64_t batch = absl::GetFlag(FLAGS_global_batch) / world;
  Generator g(1);
  MIXRT_ASSIGN_OR_RETURN(auto model,
                         nn::MLP({width, width, width, width}, device, &g));
  std::shared_ptr<distributed::DistributedDataParallel> ddp;
  if (world > 1) {
    distributed::DistributedDataParallelOptions options;
    const std::string hook = absl::GetFlag(FLAGS_comm_hook);
    if (hook == "bf16") {
      options.comm_hook = distributed::CommHook::kBf16Compress;
    } else if (hook == "fp16") {
      options.comm_hook = distributed::CommHook::kFp16Compress;
    } else if (hook == "powersgd") {
      options.comm_hook = distributed::CommHook::kPowerSgd;
      options.power_sgd.matrix_approximation_rank =
          absl::GetFlag(FLAGS_powersgd_rank);
      // Plain all-reduces during the warm-up steps only.
      options.power_sgd.start_powerSGD_iter =
          std::max(2, absl::GetFlag(FLAGS_warmup));
    } else if (!hook.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--comm_hook is '", hook,
                       "'; expected bf16, fp16, powersgd or empty"));
    }
    MIXRT_ASSIGN_OR_RETURN(ddp, distributed::DistributedDataParallel::Create(
                                    model, group, options));
  }
  nn::Module& net = ddp ? static_cast<nn::Module&>(*ddp) : *model;
  MIXRT_ASSIGN_OR_RETURN(std::unique_ptr<Optimizer> opt,
                         MakeOptimizer(model->parameters(), group));
  const bool amp = absl::GetFlag(FLAGS_amp);
  GradScaler scaler(device, {.enabled = amp});
  MIXRT_ASSIGN_OR_RETURN(Tensor x,
                         randn({batch, width}, DType::kF32, device, 0, 1, &g));
  MIXRT_ASSIGN_OR_RETURN(Tensor y,
                         randn({batch, width}, DType::kF32, device, 0, 1, &g));
  std::vector<double> step_ms, exposed_ms;
  const int warmup = absl::GetFlag(FLAGS_warmup);
  // A step is timed from one barrier's exit to the next: the pace of the
  // whole job, the same on every rank (a rank that ends its step early
  // waits in the next barrier for the slowest).
  MIXRT_RETURN_IF_ERROR(group->Barrier());
  auto start = Clock::now();
  for (int i = 0; i < warmup + absl::GetFlag(FLAGS_steps); ++i) {
    opt->zero_grad();
    Tensor loss;
    {
      AutocastGuard autocast("cpu", DType::kBF16, amp);
      MIXRT_ASSIGN_OR_RETURN(Tensor out, net.forward(x));
      MIXRT_ASSIGN_OR_RETURN(loss, mse_loss(out, y));
    }
    MIXRT_ASSIGN_OR_RETURN(Tensor scaled, scaler.scale(loss));
    MIXRT_RETURN_IF_ERROR(scaled.backward());
    MIXRT_RETURN_IF_ERROR(scaler.step(*opt));
    MIXRT_RETURN_IF_ERROR(scaler.update());
    MIXRT_RETURN_IF_ERROR(loss.item().status());
    MIXRT_RETURN_IF_ERROR(group->Barrier());
    const auto end = Clock::now();
    if (i >= warmup) {
      step_ms.push_back(Ms(start, end));
      if (ddp) exposed_ms.push_back(ddp->last_stats().exposed_ms);
    }
    start = end;
  }
  const double ms = Median(step_ms);
  const auto& stats = device.backend()->allocator(device.index()).stats();
  std::printf(
      "train: ranks %d, per-rank batch %lld, %s: %.1f ms/step, %.1f "
      "samples/s, peak %.0f MiB per rank, %s state %.1f MiB on rank %d\n",
      world, static_cast<long long>(batch), amp ? "bf16 autocast" : "f32", ms,
      absl::GetFlag(FLAGS_global_batch) * 1000.0 / ms,
      stats.peak_bytes_in_use / 1048576.0,
      absl::GetFlag(FLAGS_optimizer).c_str(), StateBytes(*opt) / 1048576.0,
      group->rank());
  if (ddp) {
    // The same buckets all-reduced with nothing else running: the time
    // backward had to hide.
    std::vector<double> alone_ms;
    for (int i = 0; i < 3; ++i) {
      std::vector<Tensor> grads;
      for (const Tensor& p : model->parameters()) grads.push_back(p.grad());
      MIXRT_RETURN_IF_ERROR(group->Barrier());
      const auto start = Clock::now();
      std::vector<distributed::Work> works;
      for (const Tensor& gr : grads) {
        MIXRT_ASSIGN_OR_RETURN(
            distributed::Work w,
            group->AllReduce(gr, distributed::ReduceOp::kAvg));
        works.push_back(std::move(w));
      }
      for (auto& w : works) MIXRT_RETURN_IF_ERROR(w.Wait());
      alone_ms.push_back(Ms(start, Clock::now()));
    }
    const double alone = Median(alone_ms), exposed = Median(exposed_ms);
    std::printf(
        "overlap: %d buckets, %.1f MiB all-reduced per step; %.1f ms alone, "
        "%.1f ms exposed after backward: %.0f%% hidden\n",
        ddp->bucket_count(), ddp->last_stats().bytes / 1048576.0, alone,
        exposed, alone > 0 ? 100.0 * std::max(0.0, 1 - exposed / alone) : 0);
  }
  return absl::OkStatus();
}

absl::Status AllReduce(
    const Device& device,
    const std::shared_ptr<distributed::ProcessGroup>& group) {
  const std::string name = absl::GetFlag(FLAGS_allreduce_dtype);
  const DType dtype = name == "bf16"  ? DType::kBF16
                      : name == "f16" ? DType::kF16
                                      : DType::kF32;
  if (name != "f32" && dtype == DType::kF32) {
    return absl::InvalidArgumentError(
        "--allreduce_dtype must be f32, bf16 "
        "or f16, not '" +
        name + "'");
  }
  for (int64_t mib : {1, 4, 16, 64, 256}) {
    MIXRT_ASSIGN_OR_RETURN(
        Tensor t, full({mib * 1048576 / DTypeSize(dtype)}, 1.0, dtype, device));
    std::vector<double> ms;
    for (int i = 0; i < 1 + absl::GetFlag(FLAGS_steps); ++i) {
      MIXRT_RETURN_IF_ERROR(group->Barrier());
      const auto start = Clock::now();
      MIXRT_ASSIGN_OR_RETURN(distributed::Work w,
                             group->AllReduce(t, distributed::ReduceOp::kSum));
      MIXRT_RETURN_IF_ERROR(w.Wait());
      if (i > 0) ms.push_back(Ms(start, Clock::now()));
    }
    const double m = Median(ms);
    if (group->rank() == 0) {
      std::printf("allreduce mixrt %s %4lld MiB: %8.2f ms  %6.2f GB/s\n",
                  name.c_str(), static_cast<long long>(mib), m,
                  mib * 1.048576 / m);
    }
  }
  return absl::OkStatus();
}

}  // namespace
}  // namespace mixrt

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  mixrt::Registry::Global().LoadAll(mixrt::BundledPluginPaths(argv[0]));
  auto device = mixrt::Registry::Global().SelectDevice("cpu");
  auto group = mixrt::distributed::ProcessGroup::Create();
  if (!device.ok() || !group.ok()) {
    std::fprintf(
        stderr, "ddp_benchmark: %s\n",
        (!device.ok() ? device.status() : group.status()).ToString().c_str());
    return 1;
  }
  const absl::Status s = absl::GetFlag(FLAGS_mode) == "allreduce"
                             ? mixrt::AllReduce(*device, *group)
                             : mixrt::Train(*device, *group);
  if (!s.ok()) {
    std::fprintf(stderr, "ddp_benchmark: %s\n", s.ToString().c_str());
    (*group)->Abort(std::string(s.message()));
  }
  return 0;
}
