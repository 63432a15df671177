// Gradient clipping with AMP: unscale_ the optimizer's gradients first, so
// the clipping threshold applies to the true gradients, then step (which
// skips on inf/NaN) and update.
//
//   bazel run //examples:grad_clipping -- --max_norm=1.0
#include <cstdio>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/status/status.h"
#include "common/out_of_memory.h"
#include "examples/flag_checks.h"
#include "examples/load_plugins.h"
#include "mixrt/mixrt.h"

ABSL_FLAG(double, max_norm, 1.0, "Largest allowed global gradient norm.");
ABSL_FLAG(int, steps, 10, "Training steps.");

namespace {

using mixrt::Tensor;

absl::Status Run(const char* argv0) {
  using mixrt::examples::CheckFlag;
  MIXRT_RETURN_IF_ERROR(mixrt::examples::CheckFiniteFlag(
      "max_norm", absl::GetFlag(FLAGS_max_norm), 0.0, 1e30));
  MIXRT_RETURN_IF_ERROR(
      CheckFlag("steps", absl::GetFlag(FLAGS_steps), 1, 1 << 24));
  mixrt::examples::LoadPlugins(argv0);
  MIXRT_ASSIGN_OR_RETURN(mixrt::Device device,
                         mixrt::Registry::Global().SelectDevice());
  mixrt::Generator gen(0);
  MIXRT_ASSIGN_OR_RETURN(auto model, mixrt::nn::MLP({32, 64, 8}, device, &gen));
  mixrt::AdamW optimizer(model->parameters(), {.lr = 1e-2});
  mixrt::GradScaler scaler(device, {.init_scale = 1024});
  for (int step = 0; step < absl::GetFlag(FLAGS_steps); ++step) {
    MIXRT_ASSIGN_OR_RETURN(Tensor x, mixrt::randn({64, 32}, mixrt::DType::kF32,
                                                  device, 0, 4, &gen));
    MIXRT_ASSIGN_OR_RETURN(Tensor y, mixrt::randn({64, 8}, mixrt::DType::kF32,
                                                  device, 0, 4, &gen));
    Tensor loss;
    {
      mixrt::AutocastGuard autocast(device.type());
      MIXRT_ASSIGN_OR_RETURN(Tensor out, model->forward(x));
      MIXRT_ASSIGN_OR_RETURN(loss, mixrt::mse_loss(out, y));
    }
    MIXRT_RETURN_IF_ERROR(scaler.scale(loss)->backward());
    MIXRT_RETURN_IF_ERROR(scaler.unscale_(optimizer));  // Before clipping.
    MIXRT_ASSIGN_OR_RETURN(
        double norm, mixrt::clip_grad_norm_(optimizer.params(),
                                            absl::GetFlag(FLAGS_max_norm)));
    MIXRT_RETURN_IF_ERROR(scaler.step(optimizer));
    MIXRT_RETURN_IF_ERROR(scaler.update());
    optimizer.zero_grad();
    MIXRT_ASSIGN_OR_RETURN(double l, loss.item());
    std::printf("step %2d  loss %8.4f  gradient norm before clipping %8.4f\n",
                step + 1, l, norm);
  }
  return absl::OkStatus();
}

}  // namespace

int main(int argc, char** argv) {
  mixrt::ReportOutOfMemoryAtExit("grad_clipping");
  mixrt::examples::ParseFlags(argc, argv,
                              "gradient clipping with autocast "
                              "and a GradScaler (unscale_ first)");
  absl::Status s = Run(argv[0]);
  if (!s.ok()) {
    std::fprintf(stderr, "%s\n", std::string(s.message()).c_str());
    return 1;
  }
  return 0;
}
