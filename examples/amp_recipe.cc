// The AMP recipe from PyTorch's documentation, in mixrt: an MLP of Linear +
// ReLU layers of the same width, MSE loss, SGD, trained three ways on the
// selected backend — default precision, autocast, autocast + GradScaler —
// each reporting time per step and the peak memory held by tensors.
//
//   bazel run //examples:amp_recipe
//   bazel run //examples:amp_recipe -- --batch=513 --dtype=f16 --backend=cpu
//   bazel run //examples:amp_recipe -- --explain   # per-op precision log
//   bazel run //examples:amp_recipe -- --compile=reduce-overhead
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
ABSL_FLAG(int64_t, batch, 512, "Batch size (try 513: not a multiple of 8).");
ABSL_FLAG(int64_t, width, 4096, "Input, hidden and output size.");
ABSL_FLAG(int, layers, 3, "Number of Linear layers.");
ABSL_FLAG(int, batches, 6, "Batches per epoch (PyTorch's recipe: 50).");
ABSL_FLAG(int, epochs, 1, "Epochs (PyTorch's recipe: 3).");
ABSL_FLAG(std::string, dtype, "",
          "Autocast dtype: f16, bf16 or auto "
          "(default: the device type's default).");
ABSL_FLAG(std::string, compile, "",
          "Run the forward and loss compiled in this mode (default, "
          "reduce-overhead, max-autotune, max-autotune-no-cudagraphs); "
          "empty: eagerly.");
ABSL_FLAG(bool, explain, false,
          "Print the per-op precision decisions of the "
          "first autocast step.");

namespace {

using mixrt::Tensor;

struct Result {
  double ms_per_step = 0;    // Steps after the first.
  double first_step_ms = 0;  // Kernel selection, BLAS heuristics, the
                             // allocator's first blocks: a cost paid once.
  double peak_mib = 0;
  double final_loss = 0;
};

enum class Mode { kDefault, kAutocast, kAutocastScaler };

absl::StatusOr<Result> Train(const mixrt::Device& device, Mode mode,
                             const mixrt::AutocastOptions& autocast,
                             const std::vector<Tensor>& data,
                             const std::vector<Tensor>& targets) {
  mixrt::Generator init(0);  // Same initial weights for every mode.
  std::vector<int64_t> sizes(absl::GetFlag(FLAGS_layers) + 1,
                             absl::GetFlag(FLAGS_width));
  MIXRT_ASSIGN_OR_RETURN(auto net, mixrt::nn::MLP(sizes, device, &init));
  mixrt::SGD opt(net->parameters(), {.lr = 0.001});
  mixrt::GradScaler scaler(device, {.enabled = mode == Mode::kAutocastScaler});
  mixrt::CachingAllocator& allocator =
      device.backend()->allocator(device.index());
  allocator.ResetPeak();
  const int epochs = absl::GetFlag(FLAGS_epochs);
  const bool use_autocast = mode != Mode::kDefault;
  auto loss_of = [&net](const std::vector<Tensor>& in)
      -> absl::StatusOr<std::vector<Tensor>> {
    MIXRT_ASSIGN_OR_RETURN(Tensor output, net->forward(in[0]));
    MIXRT_ASSIGN_OR_RETURN(Tensor l, mixrt::mse_loss(output, in[1]));
    return std::vector<Tensor>{l};
  };
  std::optional<mixrt::CompiledFunction> compiled;
  if (const std::string c = absl::GetFlag(FLAGS_compile); !c.empty()) {
    MIXRT_ASSIGN_OR_RETURN(compiled, mixrt::compile(loss_of, {.mode = c}));
  }
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  Clock::time_point after_first = start;
  int steps = 0;
  Tensor loss;
  for (int epoch = 0; epoch < epochs; ++epoch) {
    for (size_t i = 0; i < data.size(); ++i) {
      const bool explain =
          absl::GetFlag(FLAGS_explain) && use_autocast && steps == 0;
      mixrt::SetAutocastLogging(explain);
      {
        mixrt::AutocastGuard guard(
            device.type(),
            mixrt::AutocastOptions{autocast.dtype, autocast.auto_precision,
                                   use_autocast, true});
        MIXRT_ASSIGN_OR_RETURN(std::vector<Tensor> out,
                               compiled ? (*compiled)({data[i], targets[i]})
                                        : loss_of({data[i], targets[i]}));
        loss = out[0];
      }
      if (explain) {
        std::printf("%s",
                    mixrt::FormatAutocastLog(mixrt::TakeAutocastLog()).c_str());
        mixrt::SetAutocastLogging(false);
      }
      MIXRT_ASSIGN_OR_RETURN(Tensor scaled, scaler.scale(loss));
      MIXRT_RETURN_IF_ERROR(scaled.backward());
      MIXRT_RETURN_IF_ERROR(scaler.step(opt));
      MIXRT_RETURN_IF_ERROR(scaler.update());
      opt.zero_grad();
      if (++steps == 1) {
        MIXRT_RETURN_IF_ERROR(device.backend()->Synchronize(device.index()));
        after_first = Clock::now();
      }
    }
  }
  MIXRT_RETURN_IF_ERROR(device.backend()->Synchronize(device.index()));
  const auto end = Clock::now();
  auto ms = [](Clock::duration d) {
    return std::chrono::duration<double, std::milli>(d).count();
  };
  Result r;
  r.first_step_ms = ms(after_first - start);
  r.ms_per_step =
      steps > 1 ? ms(end - after_first) / (steps - 1) : r.first_step_ms;
  r.peak_mib = allocator.stats().peak_bytes_in_use / 1048576.0;
  MIXRT_ASSIGN_OR_RETURN(r.final_loss, loss.item());
  return r;
}

// What the device does with the precision asked for (why autocast is
// slower, where it is) and what --dtype=auto would pick: the capability the
// backend measured, in words.
void ExplainPrecision(const mixrt::Device& device,
                      const mixrt::AutocastOptions& autocast,
                      double autocast_speedup) {
  if (!autocast.auto_precision) {
    const mixrt::DType asked =
        autocast.dtype.value_or(mixrt::DefaultAutocastDType(device.type()));
    const mixrt::CapabilityEntry& matmul =
        device.info().capability(MIXRT_OP_CLASS_MATMUL, asked);
    if (autocast_speedup > 0 && autocast_speedup < 1) {
      std::printf("why autocast is slower here: %s matmul is %s on %s%s%s\n",
                  std::string(mixrt::DTypeName(asked)).c_str(),
                  std::string(mixrt::SupportLevelName(matmul.level)).c_str(),
                  device.ToString().c_str(), matmul.reason.empty() ? "" : ": ",
                  matmul.reason.c_str());
    }
  }
  const mixrt::PrecisionChoice pick =
      mixrt::AutoPrecision(device, MIXRT_OP_CLASS_MATMUL);
  std::printf("--dtype=auto picks %s for matmuls on this device%s%s\n",
              std::string(mixrt::DTypeName(pick.dtype)).c_str(),
              pick.reason.empty() ? "" : ": ", pick.reason.c_str());
}

absl::Status CheckFlags() {
  using mixrt::examples::CheckFlag;
  MIXRT_RETURN_IF_ERROR(
      CheckFlag("batch", absl::GetFlag(FLAGS_batch), 1, 1 << 20));
  MIXRT_RETURN_IF_ERROR(
      CheckFlag("width", absl::GetFlag(FLAGS_width), 1, 1 << 16));
  MIXRT_RETURN_IF_ERROR(
      CheckFlag("layers", absl::GetFlag(FLAGS_layers), 1, 1000));
  MIXRT_RETURN_IF_ERROR(
      CheckFlag("batches", absl::GetFlag(FLAGS_batches), 1, 1000000));
  return CheckFlag("epochs", absl::GetFlag(FLAGS_epochs), 1, 1000000);
}

absl::Status Run(const char* argv0) {
  MIXRT_RETURN_IF_ERROR(CheckFlags());
  mixrt::Registry& registry = mixrt::Registry::Global();
  mixrt::examples::LoadPlugins(argv0);
  MIXRT_ASSIGN_OR_RETURN(mixrt::Device device,
                         registry.SelectDevice(absl::GetFlag(FLAGS_backend)));
  mixrt::AutocastOptions autocast;
  const std::string dtype = absl::GetFlag(FLAGS_dtype);
  if (dtype == "auto") {
    autocast.auto_precision = true;
  } else if (!dtype.empty()) {
    MIXRT_ASSIGN_OR_RETURN(autocast.dtype, mixrt::ParseDType(dtype));
  }
  const int64_t batch = absl::GetFlag(FLAGS_batch);
  const int64_t width = absl::GetFlag(FLAGS_width);
  std::printf(
      "device %s (%s); MLP %d x Linear(%lld) + ReLU, batch %lld, "
      "%d steps per mode (the first timed apart)%s\n",
      device.ToString().c_str(), device.info().name.c_str(),
      absl::GetFlag(FLAGS_layers), static_cast<long long>(width),
      static_cast<long long>(batch),
      absl::GetFlag(FLAGS_batches) * absl::GetFlag(FLAGS_epochs),
      absl::GetFlag(FLAGS_compile).empty()
          ? ""
          : (", compiled (" + absl::GetFlag(FLAGS_compile) + ")").c_str());
  mixrt::Generator data_gen(1);
  std::vector<Tensor> data, targets;
  for (int i = 0; i < absl::GetFlag(FLAGS_batches); ++i) {
    MIXRT_ASSIGN_OR_RETURN(
        Tensor x, mixrt::randn({batch, width}, mixrt::DType::kF32, device, 0, 1,
                               &data_gen));
    MIXRT_ASSIGN_OR_RETURN(
        Tensor t, mixrt::randn({batch, width}, mixrt::DType::kF32, device, 0, 1,
                               &data_gen));
    data.push_back(x);
    targets.push_back(t);
  }
  const std::string ask =
      autocast.auto_precision
          ? "auto"
          : std::string(mixrt::DTypeName(autocast.dtype.value_or(
                mixrt::DefaultAutocastDType(device.type()))));
  struct Named {
    const char* name;
    Mode mode;
  };
  double baseline = 0;
  double autocast_speedup = 0;
  for (const Named& m :
       {Named{"default precision", Mode::kDefault},
        Named{"autocast", Mode::kAutocast},
        Named{"autocast + GradScaler", Mode::kAutocastScaler}}) {
    MIXRT_ASSIGN_OR_RETURN(Result r,
                           Train(device, m.mode, autocast, data, targets));
    if (m.mode == Mode::kDefault) baseline = r.ms_per_step;
    if (m.mode == Mode::kAutocast) autocast_speedup = baseline / r.ms_per_step;
    std::printf(
        "%-24s %-5s %8.1f ms/step (%.2fx default; first step %.0f ms)  max "
        "memory used by tensors %7.1f MiB  final loss %.5f\n",
        m.name, m.mode == Mode::kDefault ? "f32" : ask.c_str(), r.ms_per_step,
        baseline / r.ms_per_step, r.first_step_ms, r.peak_mib, r.final_loss);
  }
  for (const std::string& w : mixrt::AutocastWarnings()) {
    std::printf("autocast note: %s\n", w.c_str());
  }
  ExplainPrecision(device, autocast, autocast_speedup);
  // A backend that lacks ops (a partial plugin) trains with the rest on a
  // fallback backend: say what ran where, and what it cost in copies.
  const mixrt::FallbackCounters fallbacks = mixrt::GetFallbackCounters();
  if (fallbacks.launches > 0) {
    std::printf(
        "fallback: %lld launches ran on another backend (%lld copies, %.1f "
        "MiB copied):\n",
        static_cast<long long>(fallbacks.launches),
        static_cast<long long>(fallbacks.copies),
        fallbacks.bytes_copied / 1048576.0);
    for (const std::string& line : mixrt::FallbackLog()) {
      std::printf("  %s\n", line.c_str());
    }
  }
  return absl::OkStatus();
}

}  // namespace

int main(int argc, char** argv) {
  mixrt::ReportOutOfMemoryAtExit("amp_recipe");
  mixrt::examples::ParseFlags(
      argc, argv,
      "PyTorch's AMP recipe (an MLP, MSE, SGD) in default "
      "precision, autocast and autocast + GradScaler, with time per step and "
      "peak memory");
  absl::Status status = Run(argv[0]);
  if (!status.ok()) {
    std::fprintf(stderr, "%s\n", std::string(status.message()).c_str());
    return 1;
  }
  return 0;
}
