// mixrt::compile on training steps: eager vs "default" vs "reduce-overhead"
// in one run, for a small MLP (width 64, batch 32: per-op overhead
// dominates), the AMP recipe's MLP (bf16 autocast + GradScaler) and a
// transformer block (nn::TransformerBlock: causal attention and a GELU MLP,
// mse loss, bf16 autocast + GradScaler). The
// compiled part is the forward and its backward (the loss function); the
// optimizer and the scaler run eagerly. Prints median ms per step, the
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
ABSL_FLAG(std::string, modes, "eager,default,reduce-overhead",
          "Modes to time, comma-separated (eager first for the ratios).");

namespace {

using mixrt::Tensor;

struct Case {
  std::string name;
  std::vector<int64_t> sizes;  // MLP widths, or {sequence, width, heads}.
  int64_t batch;
  bool bf16_scaler;  // bf16 autocast + GradScaler, else f32.
  bool block = false;  // A transformer block instead of an MLP.
};

// The case's model, input and loss target (class labels for an MLP).
struct Setup {
  std::shared_ptr<mixrt::nn::Module> net;
  Tensor x, target;
};

absl::StatusOr<Setup> MakeSetup(const mixrt::Device& device, const Case& c,
                                mixrt::Generator* init) {
  Setup s;
  if (c.block) {
    const int64_t seq = c.sizes[0], width = c.sizes[1], heads = c.sizes[2];
    MIXRT_ASSIGN_OR_RETURN(
        s.net, mixrt::nn::TransformerBlock::Create(
                   {.width = width, .heads = heads, .causal = true}, device, init));
    MIXRT_ASSIGN_OR_RETURN(s.x, mixrt::randn({c.batch, seq, width},
                                             mixrt::DType::kF32, device, 0, 1, init));
    MIXRT_ASSIGN_OR_RETURN(s.target, mixrt::randn({c.batch, seq, width},
                                                  mixrt::DType::kF32, device, 0, 1, init));
    return s;
  }
  MIXRT_ASSIGN_OR_RETURN(s.net, mixrt::nn::MLP(c.sizes, device, init));
  MIXRT_ASSIGN_OR_RETURN(s.x, mixrt::randn({c.batch, c.sizes.front()},
                                           mixrt::DType::kF32, device));
  std::vector<int64_t> labels(c.batch);
  for (int64_t i = 0; i < c.batch; ++i) labels[i] = i % c.sizes.back();
  MIXRT_ASSIGN_OR_RETURN(s.target, mixrt::from_ints(labels, {c.batch},
                                                    mixrt::DType::kI64, device));
  return s;
}

struct Timing {
  double median_ms = 0, first_ms = 0, peak_mib = 0;
};

double Ms(std::chrono::steady_clock::duration d) {
  return std::chrono::duration<double, std::milli>(d).count();
}

absl::StatusOr<Timing> Run(const mixrt::Device& device, const Case& c,
                           const std::string& mode, int steps) {
  mixrt::Generator init(0);
  MIXRT_ASSIGN_OR_RETURN(Setup setup, MakeSetup(device, c, &init));
  const std::shared_ptr<mixrt::nn::Module> net = setup.net;
  const Tensor x = setup.x, y = setup.target;
  mixrt::SGD opt(net->parameters(), {.lr = 0.001});
  mixrt::GradScaler scaler(device, {.enabled = c.bf16_scaler});
  const bool block = c.block;
  auto loss_fn = [net, block](const std::vector<Tensor>& in)
      -> absl::StatusOr<std::vector<Tensor>> {
    MIXRT_ASSIGN_OR_RETURN(Tensor out, net->forward(in[0]));
    MIXRT_ASSIGN_OR_RETURN(Tensor loss, block ? mixrt::mse_loss(out, in[1])
                                              : mixrt::cross_entropy(out, in[1]));
    return std::vector<Tensor>{loss};
  };
  std::function<absl::StatusOr<std::vector<Tensor>>(const std::vector<Tensor>&)>
      step_fn = loss_fn;
  std::optional<mixrt::CompiledFunction> compiled;
  if (mode != "eager") {
    MIXRT_ASSIGN_OR_RETURN(compiled, mixrt::compile(loss_fn, {.mode = mode}));
    step_fn = [f = *compiled](const std::vector<Tensor>& in) { return f(in); };
  }
  auto step = [&]() -> absl::Status {
    std::optional<mixrt::AutocastGuard> autocast;
    if (c.bf16_scaler) autocast.emplace("cpu", mixrt::DType::kBF16);
    MIXRT_ASSIGN_OR_RETURN(std::vector<Tensor> loss, step_fn({x, y}));
    autocast.reset();
    MIXRT_ASSIGN_OR_RETURN(Tensor scaled, scaler.scale(loss[0]));
    MIXRT_RETURN_IF_ERROR(scaled.backward());
    MIXRT_RETURN_IF_ERROR(scaler.step(opt));
    MIXRT_RETURN_IF_ERROR(scaler.update());
    opt.zero_grad();
    return device.backend()->Synchronize(device.index());
  };
  mixrt::CachingAllocator& allocator = device.backend()->allocator(device.index());
  allocator.ResetPeak();
  Timing t;
  auto start = std::chrono::steady_clock::now();
  MIXRT_RETURN_IF_ERROR(step());
  t.first_ms = Ms(std::chrono::steady_clock::now() - start);
  // Warm-up: a tenth of the timed steps, at least 3 (the first case of a
  // process ran 40% slower over its first thousand small steps: clocks and
  // caches still settling).
  for (int i = 0; i < std::max(3, steps / 10); ++i) {
    MIXRT_RETURN_IF_ERROR(step());
  }
  // Peak memory of the steady state (the tracing call also runs an eager
  // step and its traced backward).
  allocator.ResetPeak();
  std::vector<double> times;
  for (int i = 0; i < steps; ++i) {
    start = std::chrono::steady_clock::now();
    MIXRT_RETURN_IF_ERROR(step());
    times.push_back(Ms(std::chrono::steady_clock::now() - start));
  }
  if (compiled.has_value() && absl::GetFlag(FLAGS_explain)) {
    std::printf("%s\n", compiled->Explain().c_str());
  }
  std::nth_element(times.begin(), times.begin() + times.size() / 2, times.end());
  t.median_ms = times[times.size() / 2];
  t.peak_mib = allocator.stats().peak_bytes_in_use / (1024.0 * 1024.0);
  return t;
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
      {"recipe MLP bf16+scaler", {w, w, w, w}, absl::GetFlag(FLAGS_recipe_batch),
       true},
      {"transformer block bf16+scaler", {128, 256, 4}, 8, true, /*block=*/true},
  };
  std::printf("mixrt::compile train steps on %s; median of %d steps\n",
              device.ToString().c_str(), absl::GetFlag(FLAGS_steps));
  std::printf("%-30s %-16s %10s %9s %12s %10s\n", "case", "mode", "ms/step",
              "vs eager", "first call", "peak MiB");
  const std::vector<std::string> modes =
      absl::StrSplit(absl::GetFlag(FLAGS_modes), ',');
  for (const Case& c : cases) {
    if (!absl::StrContains(c.name, absl::GetFlag(FLAGS_cases))) continue;
    double eager = 0;
    for (const std::string& mode : modes) {
      const int steps = c.name.rfind("small", 0) != 0
                            ? std::max(5, absl::GetFlag(FLAGS_steps) / 20)
                            : absl::GetFlag(FLAGS_steps);
      absl::StatusOr<Timing> t = Run(device, c, mode, steps);
      if (!t.ok()) {
        std::fprintf(stderr, "%s %s: %s\n", c.name.c_str(), mode.c_str(),
                     std::string(t.status().message()).c_str());
        return 1;
      }
      if (mode == "eager") eager = t->median_ms;
      std::printf("%-30s %-16s %10.3f %8.2fx %9.1f ms %10.1f\n", c.name.c_str(),
                  mode.c_str(), t->median_ms,
                  eager > 0 ? eager / t->median_ms : 0.0, t->first_ms,
                  t->peak_mib);
    }
  }
  return 0;
}
