// An application built outside mixrt's tree against the installed runtime
// (libmixrt, mixrt/mixrt.h, find_package(mixrt)): it lists the backends it
// finds, selects one by name at run time, and trains PyTorch's AMP recipe
// (an MLP, MSE loss, SGD, autocast and a GradScaler) on it, eagerly or
// compiled.
//
//   train_app [BACKEND [MODE [STEPS]]]
//     BACKEND  a backend's name ("" or "-": the best available)
//     MODE     eager, or a compile mode: default, reduce-overhead,
//              max-autotune, max-autotune-no-cudagraphs
//     STEPS    training steps (default 5)
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "mixrt/mixrt.h"

namespace {

using mixrt::Tensor;

constexpr int64_t kWidth = 64;
constexpr int64_t kBatch = 32;

void ListBackends(mixrt::Registry& registry) {
  for (const mixrt::PluginReport& report : registry.Reports()) {
    std::printf("backend %s [%s] %s%s%s\n",
                report.name.empty() ? "?" : report.name.c_str(),
                report.usable ? "usable" : "not usable", report.path.c_str(),
                report.reason.empty() ? "" : ": ", report.reason.c_str());
  }
}

absl::Status Train(const std::string& backend, const std::string& mode,
                   int steps) {
  mixrt::Registry& registry = mixrt::Registry::Global();
  registry.LoadAll();  // MIXRT_PLUGIN_PATH, then beside libmixrt.
  ListBackends(registry);
  MIXRT_ASSIGN_OR_RETURN(mixrt::Device device, registry.SelectDevice(backend));
  std::printf("mixrt %s on %s (%s), %s\n", mixrt::RuntimeVersion(),
              device.ToString().c_str(), device.info().name.c_str(),
              mode.c_str());

  mixrt::Generator init(0);
  MIXRT_ASSIGN_OR_RETURN(
      auto net,
      mixrt::nn::MLP({kWidth, kWidth, kWidth, kWidth}, device, &init));
  mixrt::SGD opt(net->parameters(), {.lr = 0.01});
  mixrt::GradScaler scaler(device);
  auto loss_of = [&net](const std::vector<Tensor>& in)
      -> absl::StatusOr<std::vector<Tensor>> {
    MIXRT_ASSIGN_OR_RETURN(Tensor output, net->forward(in[0]));
    MIXRT_ASSIGN_OR_RETURN(Tensor loss, mixrt::mse_loss(output, in[1]));
    return std::vector<Tensor>{loss};
  };
  std::optional<mixrt::CompiledFunction> compiled;
  if (mode != "eager") {
    MIXRT_ASSIGN_OR_RETURN(compiled, mixrt::compile(loss_of, {.mode = mode}));
  }

  mixrt::Generator data(1);
  MIXRT_ASSIGN_OR_RETURN(
      Tensor x,
      mixrt::randn({kBatch, kWidth}, mixrt::DType::kF32, device, 0, 1, &data));
  MIXRT_ASSIGN_OR_RETURN(
      Tensor target,
      mixrt::randn({kBatch, kWidth}, mixrt::DType::kF32, device, 0, 1, &data));
  for (int step = 0; step < steps; ++step) {
    std::vector<Tensor> out;
    {
      mixrt::AutocastGuard autocast(device.type());
      MIXRT_ASSIGN_OR_RETURN(
          out, compiled ? (*compiled)({x, target}) : loss_of({x, target}));
    }
    MIXRT_ASSIGN_OR_RETURN(Tensor scaled, scaler.scale(out[0]));
    MIXRT_RETURN_IF_ERROR(scaled.backward());
    MIXRT_RETURN_IF_ERROR(scaler.step(opt));
    MIXRT_RETURN_IF_ERROR(scaler.update());
    opt.zero_grad();
    MIXRT_ASSIGN_OR_RETURN(double loss, out[0].item());
    std::printf("step %d loss %.9g\n", step, loss);
  }
  if (mode != "eager") {
    // Inference, compiled: a graph the device runs whole is offered to its
    // plugin to fuse; Explain names the kernels it fused (a graph that
    // meets an op falling back runs eagerly, and says so).
    net->eval();
    mixrt::NoGradGuard no_grad;
    MIXRT_ASSIGN_OR_RETURN(Tensor eager_y, net->forward(x));
    MIXRT_ASSIGN_OR_RETURN(Tensor eager_loss, mixrt::mse_loss(eager_y, target));
    MIXRT_ASSIGN_OR_RETURN(double eager_value, eager_loss.item());
    std::printf("inference eager loss %.9g\n", eager_value);
    MIXRT_ASSIGN_OR_RETURN(auto forward, mixrt::compile(net, {.mode = mode}));
    for (int call = 0; call < 2; ++call) {  // A trace, then a replay.
      MIXRT_ASSIGN_OR_RETURN(Tensor y, forward(x));
      MIXRT_ASSIGN_OR_RETURN(Tensor loss, mixrt::mse_loss(y, target));
      MIXRT_ASSIGN_OR_RETURN(double value, loss.item());
      std::printf("inference %d loss %.9g\n", call, value);
    }
    std::printf("inference, compiled:\n%s\n",
                forward.compiled().Explain().c_str());
  }
  // A backend that lacks ops trains with the rest on a fallback backend.
  const mixrt::FallbackCounters fallbacks = mixrt::GetFallbackCounters();
  std::printf("fallback: %lld launches\n",
              static_cast<long long>(fallbacks.launches));
  for (const std::string& line : mixrt::FallbackLog()) {
    std::printf("  %s\n", line.c_str());
  }
  return absl::OkStatus();
}

}  // namespace

int main(int argc, char** argv) {
  const std::string backend =
      argc > 1 && std::string(argv[1]) != "-" ? argv[1] : "";
  const std::string mode = argc > 2 ? argv[2] : "eager";
  const int steps = argc > 3 ? std::atoi(argv[3]) : 5;
  if (argc > 4 || steps < 1 || steps > 100000) {
    std::fprintf(stderr,
                 "usage: %s [BACKEND [eager|COMPILE_MODE [STEPS 1..100000]]]\n",
                 argv[0]);
    return 2;
  }
  const absl::Status status = Train(backend, mode, steps);
  if (!status.ok()) {
    std::fprintf(stderr, "train_app: %s\n",
                 std::string(status.message()).c_str());
    return 1;
  }
  return 0;
}
