// Gradient accumulation with AMP, as the recipe writes it: the loss of each
// micro-batch is divided by the number of accumulation steps, gradients
// accumulate in .grad, and scaler.step / scaler.update run only at the
// effective-batch boundary.
//
//   bazel run //examples:grad_accumulation -- --accumulate=4
#include <cstdio>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/status/status.h"
#include "common/out_of_memory.h"
#include "examples/flag_checks.h"
#include "examples/load_plugins.h"
#include "mixrt/mixrt.h"

ABSL_FLAG(int, accumulate, 4, "Micro-batches per optimizer step.");
ABSL_FLAG(int, steps, 40, "Micro-batches in total.");

namespace {

using mixrt::Tensor;

absl::Status Run(const char* argv0) {
  using mixrt::examples::CheckFlag;
  MIXRT_RETURN_IF_ERROR(
      CheckFlag("accumulate", absl::GetFlag(FLAGS_accumulate), 1, 1 << 20));
  MIXRT_RETURN_IF_ERROR(
      CheckFlag("steps", absl::GetFlag(FLAGS_steps), 1, 1 << 24));
  mixrt::examples::LoadPlugins(argv0);
  MIXRT_ASSIGN_OR_RETURN(mixrt::Device device,
                         mixrt::Registry::Global().SelectDevice());
  mixrt::Generator gen(0);
  MIXRT_ASSIGN_OR_RETURN(auto model, mixrt::nn::MLP({32, 64, 1}, device, &gen));
  mixrt::SGD optimizer(model->parameters(), {.lr = 0.01, .momentum = 0.9});
  mixrt::GradScaler scaler(device);
  MIXRT_ASSIGN_OR_RETURN(
      Tensor direction,
      mixrt::randn({32, 1}, mixrt::DType::kF32, device, 0, 1, &gen));
  const int accumulate = absl::GetFlag(FLAGS_accumulate);
  for (int i = 0; i < absl::GetFlag(FLAGS_steps); ++i) {
    MIXRT_ASSIGN_OR_RETURN(Tensor x, mixrt::randn({16, 32}, mixrt::DType::kF32,
                                                  device, 0, 1, &gen));
    MIXRT_ASSIGN_OR_RETURN(Tensor y, mixrt::matmul(x, direction));
    Tensor loss;
    {
      mixrt::AutocastGuard autocast(device.type());
      MIXRT_ASSIGN_OR_RETURN(Tensor out, model->forward(x));
      MIXRT_ASSIGN_OR_RETURN(loss, mixrt::mse_loss(out, y));
      MIXRT_ASSIGN_OR_RETURN(loss, mixrt::scale(loss, 1.0 / accumulate));
    }
    MIXRT_RETURN_IF_ERROR(scaler.scale(loss)->backward());
    if ((i + 1) % accumulate == 0) {
      MIXRT_RETURN_IF_ERROR(scaler.step(optimizer));
      MIXRT_RETURN_IF_ERROR(scaler.update());
      optimizer.zero_grad();
      MIXRT_ASSIGN_OR_RETURN(double l, loss.item());
      MIXRT_ASSIGN_OR_RETURN(double s, scaler.get_scale());
      std::printf("step %2d  micro-batch loss %.4f  scale %.0f\n",
                  (i + 1) / accumulate, l * accumulate, s);
    }
  }
  return absl::OkStatus();
}

}  // namespace

int main(int argc, char** argv) {
  mixrt::ReportOutOfMemoryAtExit("grad_accumulation");
  mixrt::examples::ParseFlags(argc, argv,
                              "gradient accumulation with "
                              "autocast and a GradScaler");
  absl::Status s = Run(argv[0]);
  if (!s.ok()) {
    std::fprintf(stderr, "%s\n", std::string(s.message()).c_str());
    return 1;
  }
  return 0;
}
