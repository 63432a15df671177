// The guide's "Combining AMP and torch.compile" loop and its serving
// template, in mixrt: an MLP trained with bf16 autocast and a GradScaler,
// eager and compiled in each mode, then served compiled under inference
// mode and autocast after a warm-up. Prints ms per step, the first
// (tracing) call's time and the steady state's peak tensor memory per
// variant.
//   bazel run -c opt //examples:compile_recipe -- --width=1024 --steps=20
#include <chrono>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/status/statusor.h"
#include "common/out_of_memory.h"
#include "examples/flag_checks.h"
#include "examples/load_plugins.h"
#include "mixrt/mixrt.h"

ABSL_FLAG(std::string, backend, "", "Backend (default: best available).");
ABSL_FLAG(int64_t, width, 512, "Input, hidden and output size.");
ABSL_FLAG(int64_t, batch, 256, "Batch size.");
ABSL_FLAG(int, steps, 20, "Timed training steps per variant.");
ABSL_FLAG(bool, explain, false, "Print the compiled graphs and guards.");
ABSL_FLAG(bool, serve_process, false,
          "Only the serving process: compile, serve batches of the given "
          "size, a half and a quarter of it, and print the time from process "
          "start to the first result and how many traces it took. A second "
          "run finds the dynamic batch size in the compile cache.");

namespace {

using mixrt::Tensor;
using mixrt::examples::CheckFlag;

struct Result {
  double ms_per_step = 0, first_ms = 0, peak_mib = 0, loss = 0;
};

double Ms(std::chrono::steady_clock::time_point since) {
  return std::chrono::duration<double, std::milli>(
             std::chrono::steady_clock::now() - since)
      .count();
}

// One training run; mode "" is eager.
absl::StatusOr<Result> Train(const mixrt::Device& device,
                             const std::string& mode, const Tensor& data,
                             const Tensor& target) {
  const int64_t w = absl::GetFlag(FLAGS_width);
  mixrt::Generator init(0);  // Same weights for every variant.
  MIXRT_ASSIGN_OR_RETURN(auto model,
                         mixrt::nn::MLP({w, w, w, w}, device, &init));
  mixrt::SGD optimizer(model->parameters(), {.lr = 0.01});
  mixrt::GradScaler scaler(device);
  std::optional<mixrt::CompiledModule<mixrt::nn::Sequential>> compiled;
  if (!mode.empty()) {
    MIXRT_ASSIGN_OR_RETURN(compiled, mixrt::compile(model, {.mode = mode}));
  }
  auto step = [&]() -> absl::StatusOr<double> {
    optimizer.zero_grad();
    Tensor loss;
    {
      mixrt::AutocastGuard autocast(device.type(), mixrt::DType::kBF16);
      MIXRT_ASSIGN_OR_RETURN(
          Tensor output, compiled ? (*compiled)(data) : model->forward(data));
      MIXRT_ASSIGN_OR_RETURN(loss, mixrt::cross_entropy(output, target));
    }
    MIXRT_ASSIGN_OR_RETURN(Tensor scaled, scaler.scale(loss));
    MIXRT_RETURN_IF_ERROR(scaled.backward());
    MIXRT_RETURN_IF_ERROR(scaler.step(optimizer));
    MIXRT_RETURN_IF_ERROR(scaler.update());
    return loss.item();
  };
  mixrt::CachingAllocator& allocator =
      device.backend()->allocator(device.index());
  Result r;
  auto start = std::chrono::steady_clock::now();
  MIXRT_ASSIGN_OR_RETURN(r.loss, step());
  r.first_ms = Ms(start);
  // The steady state's peak (the first call also traces the backward).
  allocator.ResetPeak();
  start = std::chrono::steady_clock::now();
  const int steps = absl::GetFlag(FLAGS_steps);
  for (int i = 0; i < steps; ++i) {
    MIXRT_ASSIGN_OR_RETURN(r.loss, step());
  }
  r.ms_per_step = Ms(start) / steps;
  r.peak_mib = allocator.stats().peak_bytes_in_use / (1024.0 * 1024.0);
  if (compiled && absl::GetFlag(FLAGS_explain)) {
    std::printf("%s\n", compiled->compiled().Explain().c_str());
  }
  return r;
}

// The serving template: warm-up, then inference mode + autocast, compiled.
absl::StatusOr<Result> Serve(const mixrt::Device& device, bool compile,
                             const Tensor& data) {
  const int64_t w = absl::GetFlag(FLAGS_width);
  mixrt::Generator init(0);
  MIXRT_ASSIGN_OR_RETURN(auto model,
                         mixrt::nn::MLP({w, w, w, w}, device, &init));
  std::optional<mixrt::CompiledModule<mixrt::nn::Sequential>> compiled;
  if (compile) {
    MIXRT_ASSIGN_OR_RETURN(compiled,
                           mixrt::compile(model, {.mode = "reduce-overhead"}));
  }
  mixrt::InferenceModeGuard inference;
  mixrt::AutocastGuard autocast(device.type(), mixrt::DType::kBF16);
  auto infer = [&]() -> absl::StatusOr<Tensor> {
    return compiled ? (*compiled)(data) : model->forward(data);
  };
  Result r;
  auto start = std::chrono::steady_clock::now();
  MIXRT_RETURN_IF_ERROR(infer().status());
  r.first_ms = Ms(start);
  for (int i = 0; i < 3; ++i)
    MIXRT_RETURN_IF_ERROR(infer().status());  // Warm-up.
  mixrt::CachingAllocator& allocator =
      device.backend()->allocator(device.index());
  allocator.ResetPeak();
  start = std::chrono::steady_clock::now();
  const int steps = absl::GetFlag(FLAGS_steps);
  for (int i = 0; i < steps; ++i) MIXRT_RETURN_IF_ERROR(infer().status());
  r.ms_per_step = Ms(start) / steps;
  r.peak_mib = allocator.stats().peak_bytes_in_use / (1024.0 * 1024.0);
  return r;
}

// A serving process: what a restart costs before its first answer.
absl::Status ServeProcess(const mixrt::Device& device,
                          std::chrono::steady_clock::time_point process_start) {
  const int64_t w = absl::GetFlag(FLAGS_width),
                batch = absl::GetFlag(FLAGS_batch);
  mixrt::Generator init(0);
  MIXRT_ASSIGN_OR_RETURN(auto model,
                         mixrt::nn::MLP({w, w, w, w}, device, &init));
  model->eval();
  MIXRT_ASSIGN_OR_RETURN(auto compiled,
                         mixrt::compile(model, {.mode = "reduce-overhead"}));
  mixrt::InferenceModeGuard inference;
  mixrt::AutocastGuard autocast(device.type(), mixrt::DType::kBF16);
  double first_ms = 0;
  for (const int64_t rows : {batch, batch / 2, batch / 4, batch / 3}) {
    if (rows < 1) continue;
    mixrt::Generator g(static_cast<uint64_t>(rows));
    MIXRT_ASSIGN_OR_RETURN(Tensor x, mixrt::randn({rows, w}, mixrt::DType::kF32,
                                                  device, 0, 1, &g));
    MIXRT_RETURN_IF_ERROR(compiled(x).status());
    if (first_ms == 0) first_ms = Ms(process_start);
  }
  const mixrt::CompiledFunction& f = compiled.compiled();
  std::printf(
      "serving process: first result %.1f ms after process start; "
      "%d traces for batches %lld, %lld, %lld, %lld%s\n",
      first_ms, f.compiles(), static_cast<long long>(batch),
      static_cast<long long>(batch / 2), static_cast<long long>(batch / 4),
      static_cast<long long>(batch / 3),
      f.Explain().find("loaded from the compile cache") != std::string::npos
          ? " (dynamic batch loaded from the compile cache)"
          : "");
  return absl::OkStatus();
}

absl::Status Main(const char* argv0,
                  std::chrono::steady_clock::time_point process_start) {
  mixrt::examples::LoadPlugins(argv0);
  MIXRT_RETURN_IF_ERROR(
      CheckFlag("width", absl::GetFlag(FLAGS_width), 1, 1 << 16));
  MIXRT_RETURN_IF_ERROR(
      CheckFlag("batch", absl::GetFlag(FLAGS_batch), 1, 1 << 20));
  MIXRT_RETURN_IF_ERROR(
      CheckFlag("steps", absl::GetFlag(FLAGS_steps), 1, 100000));
  MIXRT_ASSIGN_OR_RETURN(
      mixrt::Device device,
      mixrt::Registry::Global().SelectDevice(absl::GetFlag(FLAGS_backend)));
  if (absl::GetFlag(FLAGS_serve_process))
    return ServeProcess(device, process_start);
  const int64_t w = absl::GetFlag(FLAGS_width),
                batch = absl::GetFlag(FLAGS_batch);
  mixrt::Generator g(1);
  MIXRT_ASSIGN_OR_RETURN(
      Tensor data,
      mixrt::randn({batch, w}, mixrt::DType::kF32, device, 0, 1, &g));
  std::vector<int64_t> labels(batch);
  for (int64_t i = 0; i < batch; ++i) labels[i] = (i * 7) % w;
  MIXRT_ASSIGN_OR_RETURN(
      Tensor target,
      mixrt::from_ints(labels, {batch}, mixrt::DType::kI64, device));
  std::printf(
      "compile_recipe on %s: MLP 3 x Linear(%lld) + ReLU, batch %lld, "
      "bf16 autocast + GradScaler, %d steps\n",
      device.ToString().c_str(), static_cast<long long>(w),
      static_cast<long long>(batch), absl::GetFlag(FLAGS_steps));
  std::printf("%-36s %9s %9s %12s %9s %8s\n", "variant", "ms/step", "vs eager",
              "first call", "peak MiB", "loss");
  double eager = 0;
  for (const std::string mode :
       {"", "default", "reduce-overhead", "max-autotune"}) {
    MIXRT_ASSIGN_OR_RETURN(Result r, Train(device, mode, data, target));
    if (mode.empty()) eager = r.ms_per_step;
    std::printf("%-36s %9.2f %8.2fx %9.1f ms %9.1f %8.4f\n",
                (mode.empty() ? std::string("train, eager")
                              : "train, compile(mode=" + mode + ")")
                    .c_str(),
                r.ms_per_step, eager / r.ms_per_step, r.first_ms, r.peak_mib,
                r.loss);
  }
  for (bool compile : {false, true}) {
    MIXRT_ASSIGN_OR_RETURN(Result r, Serve(device, compile, data));
    if (!compile) eager = r.ms_per_step;
    std::printf("%-36s %9.2f %8.2fx %9.1f ms %9.1f %8s\n",
                compile ? "serve, compile(reduce-overhead)" : "serve, eager",
                r.ms_per_step, eager / r.ms_per_step, r.first_ms, r.peak_mib,
                "-");
  }
  return absl::OkStatus();
}

}  // namespace

int main(int argc, char** argv) {
  mixrt::ReportOutOfMemoryAtExit("compile_recipe");
  const auto process_start = std::chrono::steady_clock::now();
  mixrt::examples::ParseFlags(argc, argv,
                              "AMP with mixrt::compile, eager "
                              "and each mode, then served compiled");
  const absl::Status s = Main(argv[0], process_start);
  if (!s.ok()) {
    std::fprintf(stderr, "%s\n", std::string(s.message()).c_str());
    return 1;
  }
  return 0;
}
