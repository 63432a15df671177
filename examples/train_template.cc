// The training-script template from the AMP guide, on the digits data:
// AdamW, GradScaler, autocast, a validation loop under inference mode and
// autocast, periodic loss logging with a progress bar, and checkpoint
// save/resume.
//
//   bazel run //examples:train_template -- --amp --dtype=bf16
//   bazel run //examples:train_template -- --checkpoint=/tmp/run.ckpt --resume
//   mpirun -np 2 bazel-bin/examples/train_template --distributed
//       --checkpoint=/tmp/run.ckpt           (one command line)
//
// --distributed hands the Trainer the job's process group: each rank trains
// on its rows of every batch (--batch stays the global batch), validates
// its share of the validation batches, and rank 0 writes the checkpoints
// and prints. A checkpoint resumes on any number of ranks.
#include <cstdio>
#include <numeric>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/status/status.h"
#include "common/out_of_memory.h"
#include "examples/digits_data.h"
#include "examples/flag_checks.h"
#include "examples/load_plugins.h"
#include "mixrt/mixrt.h"

ABSL_FLAG(bool, amp, true, "Use automatic mixed precision.");
ABSL_FLAG(std::string, dtype, "bf16", "AMP dtype: f16, bf16 or auto.");
ABSL_FLAG(std::string, backend, "", "Backend (default: best available).");
ABSL_FLAG(int, epochs, 10, "Epochs.");
ABSL_FLAG(int64_t, batch, 64, "Batch size.");
ABSL_FLAG(int, log_every, 5, "Log the loss every N steps.");
ABSL_FLAG(std::string, checkpoint, "", "Save a checkpoint here every epoch.");
ABSL_FLAG(bool, resume, false, "Resume from --checkpoint.");
ABSL_FLAG(bool, distributed, false,
          "Data-parallel over the ranks of the mpirun job this process is "
          "in.");

namespace {

using mixrt::Tensor;

std::string ProgressBar(double fraction, int width = 30) {
  const int done = static_cast<int>(fraction * width + 0.5);
  return "[" + std::string(done, '#') + std::string(width - done, '.') + "]";
}

absl::Status Run(const char* argv0) {
  using mixrt::examples::CheckFlag;
  MIXRT_RETURN_IF_ERROR(
      CheckFlag("epochs", absl::GetFlag(FLAGS_epochs), 1, 1000000));
  MIXRT_RETURN_IF_ERROR(
      CheckFlag("log_every", absl::GetFlag(FLAGS_log_every), 1, 1000000));
  mixrt::Registry& registry = mixrt::Registry::Global();
  mixrt::examples::LoadPlugins(argv0);
  MIXRT_ASSIGN_OR_RETURN(mixrt::Device device,
                         registry.SelectDevice(absl::GetFlag(FLAGS_backend)));
  MIXRT_ASSIGN_OR_RETURN(mixrt::examples::Digits data,
                         mixrt::examples::LoadDigits());
  // Train on the first 1437 images, validate on the rest.
  const int64_t n_train = data.count() * 4 / 5,
                batch = absl::GetFlag(FLAGS_batch);
  MIXRT_RETURN_IF_ERROR(CheckFlag("batch", batch, 1, n_train));
  std::shared_ptr<mixrt::distributed::ProcessGroup> group;
  int rank = 0, world = 1;
  if (absl::GetFlag(FLAGS_distributed)) {
    MIXRT_ASSIGN_OR_RETURN(group, mixrt::distributed::ProcessGroup::Create());
    rank = group->rank();
    world = group->world_size();
  }
  std::vector<Tensor> xs, ys, vx, vy;
  int64_t validation_batch = 0;
  for (int64_t b = 0; b < data.count(); b += batch) {
    const bool train = b < n_train;
    const int64_t begin = b;
    const int64_t batch_end =
        std::min(train ? n_train : data.count(), b + batch);
    if (train && batch_end == n_train) b = n_train - batch;  // Validation next.
    // This rank's rows of a training batch; its share of validation batches.
    int64_t s = begin, e = batch_end;
    if (train) {
      const int64_t per = (batch_end - begin) / world;
      s = begin + rank * per;
      e = s + per;
      if (per == 0) continue;
    } else if (validation_batch++ % world != rank) {
      continue;
    }
    std::vector<float> px(data.pixels.begin() + s * 64,
                          data.pixels.begin() + e * 64);
    std::vector<int64_t> lab(data.labels.begin() + s, data.labels.begin() + e);
    MIXRT_ASSIGN_OR_RETURN(
        Tensor x,
        mixrt::from_floats(px, {e - s, 64}, mixrt::DType::kF32, device));
    MIXRT_ASSIGN_OR_RETURN(
        Tensor y, mixrt::from_ints(lab, {e - s}, mixrt::DType::kI64, device));
    (train ? xs : vx).push_back(x);
    (train ? ys : vy).push_back(y);
  }

  mixrt::Generator init(0);
  MIXRT_ASSIGN_OR_RETURN(auto model,
                         mixrt::nn::MLP({64, 128, 10}, device, &init));
  mixrt::TrainerOptions options;
  options.use_amp = absl::GetFlag(FLAGS_amp);
  options.process_group = group;
  const std::string dtype = absl::GetFlag(FLAGS_dtype);
  if (dtype == "auto") {
    options.auto_precision = true;
  } else {
    MIXRT_ASSIGN_OR_RETURN(options.amp_dtype, mixrt::ParseDType(dtype));
  }
  mixrt::Trainer trainer(
      model,
      std::make_unique<mixrt::AdamW>(model->parameters(),
                                     mixrt::AdamWOptions{.lr = 2e-3}),
      [](const Tensor& out, const Tensor& y) {
        return mixrt::cross_entropy(out, y);
      },
      device, options);
  // One rank speaks for the job.
  auto print = [rank](auto... args) {
    if (rank == 0) std::printf(args...);
  };
  print("device %s; AMP %s; scaler %s%s\n", device.ToString().c_str(),
        trainer.amp_reason().c_str(),
        trainer.scaler().is_enabled() ? "on" : "off",
        group ? ("; " + std::to_string(world) + " ranks over " +
                 group->description())
                    .c_str()
              : "");

  const std::string ckpt = absl::GetFlag(FLAGS_checkpoint);
  // Before any training: an unwritable path, or another run writing the
  // same checkpoint, is reported now rather than after the first epoch.
  // Only rank 0 writes it; every rank learns whether it can.
  if (!ckpt.empty()) {
    MIXRT_RETURN_IF_ERROR(trainer.claim_checkpoint_path(ckpt));
  }
  if (absl::GetFlag(FLAGS_resume) && !ckpt.empty()) {
    MIXRT_RETURN_IF_ERROR(trainer.load_checkpoint(ckpt));
    print("resumed from %s at step %lld\n", ckpt.c_str(),
          static_cast<long long>(trainer.step()));
  }
  const int steps_per_epoch = static_cast<int>(xs.size());
  const int64_t first_epoch = trainer.step() / steps_per_epoch;
  for (int64_t epoch = first_epoch; epoch < absl::GetFlag(FLAGS_epochs);
       ++epoch) {
    // The running loss stays on the device: reading it waits for the
    // device, so it is read only when a line is printed.
    mixrt::Tensor running;
    for (int i = 0; i < steps_per_epoch; ++i) {
      MIXRT_ASSIGN_OR_RETURN(mixrt::Tensor loss,
                             trainer.train_step(xs[i], ys[i]));
      if (running.defined()) {
        MIXRT_ASSIGN_OR_RETURN(running, mixrt::add(running, loss));
      } else {
        running = loss;
      }
      if ((i + 1) % absl::GetFlag(FLAGS_log_every) == 0 ||
          i + 1 == steps_per_epoch) {
        MIXRT_ASSIGN_OR_RETURN(double total, running.item());
        print("\repoch %2lld %s loss %.4f", static_cast<long long>(epoch + 1),
              ProgressBar((i + 1.0) / steps_per_epoch).c_str(),
              total / (i + 1));
        std::fflush(stdout);
      }
    }
    MIXRT_ASSIGN_OR_RETURN(mixrt::EvalResult val, trainer.evaluate(vx, vy));
    print("  | val loss %.4f  val accuracy %.2f%%\n", val.loss,
          100 * val.accuracy);
    if (!ckpt.empty()) MIXRT_RETURN_IF_ERROR(trainer.save_checkpoint(ckpt));
  }
  return absl::OkStatus();
}

}  // namespace

int main(int argc, char** argv) {
  mixrt::ReportOutOfMemoryAtExit("train_template");
  mixrt::examples::ParseFlags(argc, argv,
                              "the AMP guide's training-script "
                              "template on the digits data");
  absl::Status s = Run(argv[0]);
  if (!s.ok()) {
    std::fprintf(stderr, "%s\n", std::string(s.message()).c_str());
    return 1;
  }
  return 0;
}
