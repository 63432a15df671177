// mixrt::compile: eager vs "default" vs "reduce-overhead" vs "max-autotune"
// in one run, on training steps of a small MLP (width 64, batch 32: per-op
// overhead dominates), the AMP recipe's MLP (bf16 autocast + GradScaler)
// and a transformer block (nn::TransformerBlock: causal attention and a
// GELU MLP, mse loss, bf16 autocast + GradScaler), and on inference (the
// serving template: eval(), inference mode, autocast) of the block and of
// a small CNN (conv + batch norm + relu), and a training block with
// dropout (traced with the RNG state). In training the compiled part is
// the forward and its backward (the loss function); the optimizer and the
// scaler run eagerly. Prints median ms per step, the
// ratio to eager, the first (tracing) call's time and the steady state's
// peak tensor memory.
//   bazel run -c opt //benchmarks:compile_benchmark -- --steps=200
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/str_split.h"
#include "benchmarks/benchmark_support.h"
#include "mixrt/mixrt.h"

ABSL_FLAG(int, steps, 100, "Timed steps per case (the median is printed).");
ABSL_FLAG(int64_t, recipe_width, 1024,
          "The recipe MLP's width (the recipe itself uses 4096).");
ABSL_FLAG(int64_t, recipe_batch, 512, "The recipe MLP's batch.");
ABSL_FLAG(std::string, cases, "",
          "Only the cases whose name contains this (default: all).");
ABSL_FLAG(bool, explain, false,
          "Print each compiled case's graphs (compile's Explain()) after it.");
ABSL_FLAG(std::string, modes, "eager,default,reduce-overhead,max-autotune",
          "Modes to time, comma-separated (eager first for the ratios).");

namespace {

using mixrt::Tensor;

struct Case {
  std::string name;
  std::vector<int64_t> sizes;  // MLP widths, or {sequence, width, heads}.
  int64_t batch;
  bool bf16_scaler;        // bf16 autocast + GradScaler, else f32.
  bool block = false;      // A transformer block instead of an MLP.
  bool inference = false;  // Forward only, eval() and inference mode.
  bool cnn = false;        // Conv+BatchNorm+ReLU x3, sizes {image, channels}.
  double dropout = 0;      // The block's (attention and residual dropout).
};

// The case's model, input and loss target (class labels for an MLP).
struct Setup {
  std::shared_ptr<mixrt::nn::Module> net;
  Tensor x, target;
};

absl::StatusOr<Setup> MakeSetup(const mixrt::Device& device, const Case& c,
                                mixrt::Generator* init) {
  Setup s;
  if (c.cnn) {
    // Three conv(3x3, padding 1) + batch norm + relu, the usual small CNN
    // stem: channels 3 -> c -> c -> c, a max pool after the first.
    const int64_t image = c.sizes[0], ch = c.sizes[1];
    auto seq = std::make_shared<mixrt::nn::Sequential>();
    int64_t in = 3;
    for (int layer = 0; layer < 3; ++layer) {
      MIXRT_ASSIGN_OR_RETURN(
          auto conv,
          mixrt::nn::Conv2d::Create(in, ch, 3, device, init, 1, 1, 1, false));
      MIXRT_ASSIGN_OR_RETURN(auto bn,
                             mixrt::nn::BatchNorm2d::Create(ch, device));
      seq->append(conv);
      seq->append(bn);
      seq->append(std::make_shared<mixrt::nn::ReLU>());
      if (layer == 0) seq->append(std::make_shared<mixrt::nn::MaxPool2d>(2, 2));
      in = ch;
    }
    s.net = seq;
    MIXRT_ASSIGN_OR_RETURN(
        s.x, mixrt::randn({c.batch, 3, image, image}, mixrt::DType::kF32,
                          device, 0, 1, init));
    return s;
  }
  if (c.block) {
    const int64_t seq = c.sizes[0], width = c.sizes[1], heads = c.sizes[2];
    MIXRT_ASSIGN_OR_RETURN(
        s.net, mixrt::nn::TransformerBlock::Create({.width = width,
                                                    .heads = heads,
                                                    .dropout = c.dropout,
                                                    .causal = true},
                                                   device, init));
    MIXRT_ASSIGN_OR_RETURN(
        s.x, mixrt::randn({c.batch, seq, width}, mixrt::DType::kF32, device, 0,
                          1, init));
    MIXRT_ASSIGN_OR_RETURN(
        s.target, mixrt::randn({c.batch, seq, width}, mixrt::DType::kF32,
                               device, 0, 1, init));
    return s;
  }
  MIXRT_ASSIGN_OR_RETURN(s.net, mixrt::nn::MLP(c.sizes, device, init));
  MIXRT_ASSIGN_OR_RETURN(s.x, mixrt::randn({c.batch, c.sizes.front()},
                                           mixrt::DType::kF32, device));
  std::vector<int64_t> labels(c.batch);
  for (int64_t i = 0; i < c.batch; ++i) labels[i] = i % c.sizes.back();
  MIXRT_ASSIGN_OR_RETURN(
      s.target,
      mixrt::from_ints(labels, {c.batch}, mixrt::DType::kI64, device));
  return s;
}

struct Timing {
  double median_ms = 0, first_ms = 0, peak_mib = 0;
};

double Ms(std::chrono::steady_clock::duration d) {
  return std::chrono::duration<double, std::milli>(d).count();
}

// One mode of a case: its own model, optimizer and scaler, and its step.
struct Runner {
  std::string mode;
  std::function<absl::Status()> step;
  std::optional<mixrt::CompiledFunction> compiled;
  Timing timing;
  std::vector<double> times;
};

// Builds the mode's step, runs its first call, a warm-up and a few steps
// for the steady state's peak memory (counted from what was in use before
// the runner was made: the other modes' memory is idle meanwhile).
absl::StatusOr<std::unique_ptr<Runner>> MakeRunner(const mixrt::Device& device,
                                                   const Case& c,
                                                   const std::string& mode,
                                                   int warmup) {
  mixrt::CachingAllocator& allocator =
      device.backend()->allocator(device.index());
  const double before = allocator.stats().bytes_in_use;
  auto r = std::make_unique<Runner>();
  r->mode = mode;
  // Modules that drop out share the stream (Generator::Share): it may go.
  mixrt::Generator init(0);
  MIXRT_ASSIGN_OR_RETURN(Setup setup, MakeSetup(device, c, &init));
  const std::shared_ptr<mixrt::nn::Module> net = setup.net;
  const Tensor x = setup.x, y = setup.target;
  auto opt = std::make_shared<mixrt::SGD>(net->parameters(),
                                          mixrt::SgdOptions{.lr = 0.001});
  auto scaler = std::make_shared<mixrt::GradScaler>(
      device, mixrt::GradScalerOptions{.enabled = c.bf16_scaler});
  const bool block = c.block;
  auto loss_fn = [net, block](const std::vector<Tensor>& in)
      -> absl::StatusOr<std::vector<Tensor>> {
    MIXRT_ASSIGN_OR_RETURN(Tensor out, net->forward(in[0]));
    MIXRT_ASSIGN_OR_RETURN(Tensor loss, block
                                            ? mixrt::mse_loss(out, in[1])
                                            : mixrt::cross_entropy(out, in[1]));
    return std::vector<Tensor>{loss};
  };
  auto forward_fn = [net](const std::vector<Tensor>& in)
      -> absl::StatusOr<std::vector<Tensor>> {
    MIXRT_ASSIGN_OR_RETURN(Tensor out, net->forward(in[0]));
    return std::vector<Tensor>{out};
  };
  if (c.inference) net->eval();
  using StepFn = std::function<absl::StatusOr<std::vector<Tensor>>(
      const std::vector<Tensor>&)>;
  StepFn step_fn = c.inference ? StepFn(forward_fn) : StepFn(loss_fn);
  if (mode != "eager") {
    MIXRT_ASSIGN_OR_RETURN(r->compiled,
                           mixrt::compile(step_fn, {.mode = mode}));
    step_fn = [f = *r->compiled](const std::vector<Tensor>& in) {
      return f(in);
    };
  }
  r->step = [=, &device]() -> absl::Status {
    if (c.inference) {
      // The serving template: inference mode, autocast, the forward.
      mixrt::InferenceModeGuard inference;
      std::optional<mixrt::AutocastGuard> autocast;
      if (c.bf16_scaler) autocast.emplace("cpu", mixrt::DType::kBF16);
      MIXRT_ASSIGN_OR_RETURN(std::vector<Tensor> out, step_fn({x}));
      return device.backend()->Synchronize(device.index());
    }
    std::optional<mixrt::AutocastGuard> autocast;
    if (c.bf16_scaler) autocast.emplace("cpu", mixrt::DType::kBF16);
    MIXRT_ASSIGN_OR_RETURN(std::vector<Tensor> loss, step_fn({x, y}));
    autocast.reset();
    MIXRT_ASSIGN_OR_RETURN(Tensor scaled, scaler->scale(loss[0]));
    MIXRT_RETURN_IF_ERROR(scaled.backward());
    MIXRT_RETURN_IF_ERROR(scaler->step(*opt));
    MIXRT_RETURN_IF_ERROR(scaler->update());
    opt->zero_grad();
    return device.backend()->Synchronize(device.index());
  };
  auto start = std::chrono::steady_clock::now();
  MIXRT_RETURN_IF_ERROR(r->step());
  r->timing.first_ms = Ms(std::chrono::steady_clock::now() - start);
  // Warm-up (the first case of a process ran 40% slower over its first
  // thousand small steps: clocks and caches still settling).
  for (int i = 0; i < warmup; ++i) MIXRT_RETURN_IF_ERROR(r->step());
  // Peak memory of the steady state (the tracing call also runs an eager
  // step and its traced backward).
  allocator.ResetPeak();
  for (int i = 0; i < 3; ++i) MIXRT_RETURN_IF_ERROR(r->step());
  r->timing.peak_mib =
      (allocator.stats().peak_bytes_in_use - before) / (1024.0 * 1024.0);
  return r;
}

// Times the runners in rounds, each round a slice of every mode's steps, so
// that a machine whose speed drifts (these VMs do, by 10-20% over
// seconds) slows every mode alike.
absl::Status TimeInRounds(const std::vector<std::unique_ptr<Runner>>& runners,
                          int steps) {
  const int rounds = std::min(steps, 8);
  for (int round = 0; round < rounds; ++round) {
    for (const auto& r : runners) {
      const int n = steps / rounds + (round < steps % rounds ? 1 : 0);
      for (int i = 0; i < n; ++i) {
        const auto start = std::chrono::steady_clock::now();
        MIXRT_RETURN_IF_ERROR(r->step());
        r->times.push_back(Ms(std::chrono::steady_clock::now() - start));
      }
    }
  }
  for (const auto& r : runners) {
    std::vector<double>& t = r->times;
    std::nth_element(t.begin(), t.begin() + t.size() / 2, t.end());
    r->timing.median_ms = t[t.size() / 2];
  }
  return absl::OkStatus();
}

}  // namespace

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  mixrt::bench::LoadPlugins(argv[0]);
  const mixrt::Device device = mixrt::bench::CpuDevice();
  const int64_t w = absl::GetFlag(FLAGS_recipe_width);
  const std::vector<Case> cases = {
      {"small MLP f32 (64, batch 32)", {64, 64, 64, 10}, 32, false},
      {"small MLP bf16+scaler", {64, 64, 64, 10}, 32, true},
      {"recipe MLP bf16+scaler",
       {w, w, w, w},
       absl::GetFlag(FLAGS_recipe_batch),
       true},
      {"transformer block bf16+scaler", {128, 256, 4}, 8, true, /*block=*/true},
      // Dropout is traced into the graph (it was a graph break: eager).
      {"transformer block f32 dropout 0.1",
       {128, 256, 4},
       8,
       false,
       /*block=*/true,
       /*inference=*/false,
       /*cnn=*/false,
       /*dropout=*/0.1},
      {"transformer block bf16 infer",
       {128, 256, 4},
       8,
       true,
       /*block=*/true,
       /*inference=*/true},
      {"CNN bf16 infer (32px, 32ch)",
       {32, 32},
       32,
       true,
       false,
       /*inference=*/true,
       /*cnn=*/true},
      {"CNN f32 infer (32px, 32ch)",
       {32, 32},
       32,
       false,
       false,
       /*inference=*/true,
       /*cnn=*/true},
  };
  std::printf("mixrt::compile train steps on %s; median of %d steps\n",
              device.ToString().c_str(), absl::GetFlag(FLAGS_steps));
  std::printf("%-30s %-16s %10s %9s %12s %10s\n", "case", "mode", "ms/step",
              "vs eager", "first call", "peak MiB");
  const std::vector<std::string> modes =
      absl::StrSplit(absl::GetFlag(FLAGS_modes), ',');
  for (const Case& c : cases) {
    if (!absl::StrContains(c.name, absl::GetFlag(FLAGS_cases))) continue;
    const int steps = c.name.rfind("small", 0) != 0
                          ? std::max(5, absl::GetFlag(FLAGS_steps) / 20)
                          : absl::GetFlag(FLAGS_steps);
    std::vector<std::unique_ptr<Runner>> runners;
    absl::Status status;
    for (const std::string& mode : modes) {
      absl::StatusOr<std::unique_ptr<Runner>> r =
          MakeRunner(device, c, mode, std::max(3, steps / 10));
      if (!r.ok()) {
        status = r.status();
        std::fprintf(stderr, "%s %s: %s\n", c.name.c_str(), mode.c_str(),
                     std::string(status.message()).c_str());
        return 1;
      }
      runners.push_back(*std::move(r));
    }
    status = TimeInRounds(runners, steps);
    if (!status.ok()) {
      std::fprintf(stderr, "%s: %s\n", c.name.c_str(),
                   std::string(status.message()).c_str());
      return 1;
    }
    const double eager = runners.front()->mode == "eager"
                             ? runners.front()->timing.median_ms
                             : 0;
    for (const auto& r : runners) {
      const Timing& t = r->timing;
      std::printf("%-30s %-16s %10.3f %8.2fx %9.1f ms %10.1f\n", c.name.c_str(),
                  r->mode.c_str(), t.median_ms,
                  eager > 0 ? eager / t.median_ms : 0.0, t.first_ms,
                  t.peak_mib);
      if (r->compiled.has_value() && absl::GetFlag(FLAGS_explain)) {
        std::printf("%s\n", r->compiled->Explain().c_str());
      }
    }
  }
  return 0;
}
