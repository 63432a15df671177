// A small Trainer wiring model, optimizer, autocast, GradScaler and
// checkpoints behind one use_amp switch, as the AMP trainer integration
// guide describes. use_amp turns itself off, with the reason, where the
// device cannot run lower-precision matmul or is measured slower in it.
#ifndef MIXRT_CORE_TRAIN_TRAINER_H_
#define MIXRT_CORE_TRAIN_TRAINER_H_

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/file_lock.h"
#include "core/amp/autocast/autocast.h"
#include "core/amp/grad_scaler/grad_scaler.h"
#include "core/compiler/compile.h"
#include "core/distributed/distributed_data_parallel.h"
#include "core/nn/module.h"
#include "core/optim/optimizer.h"
#include "core/train/training_snapshot.h"

namespace mixrt {

// loss = criterion(model output, target)
using Criterion = std::function<absl::StatusOr<Tensor>(const Tensor& output,
                                                       const Tensor& target)>;

struct TrainerOptions {
  bool use_amp = true;
  std::optional<DType> amp_dtype;  // Default: the device type's (cpu bf16).
  bool auto_precision = false;     // Per op class, the fastest native dtype.
  // Run AMP even where it is measured slower (to compare accuracy).
  bool force_amp = false;
  // Gradient scaling: f16 needs it; bf16 may use it.
  std::optional<bool> use_scaler;
  int accumulation_steps = 1;            // Update every N micro-batches.
  std::optional<double> clip_grad_norm;  // Unscale, then clip.
  // Runs the model's forward compiled (mixrt::compile with these options);
  // the optimizer, scaler and loss stay eager.
  std::optional<CompileOptions> compile;
  // Data-parallel training over this group (mpirun -np N): the model is
  // wrapped in DistributedDataParallel before the first step, each rank
  // passes train_step its shard of the global batch (DistributedSampler),
  // micro-batches before the last of an accumulation skip the all-reduce
  // (no_sync), evaluate() sums every rank's shard, and checkpoints are
  // written by rank 0 (distributed_checkpoint.h).
  std::shared_ptr<distributed::ProcessGroup> process_group;
  // Training that survives its backend: every `snapshot_every` optimizer
  // steps the Trainer keeps a copy of model, optimizer and scaler state in
  // host memory (training_snapshot.h), and the micro-batches since. When a
  // step fails because the backend did (an out-of-process plugin that
  // crashed or hung: UNAVAILABLE, Backend::failure() says why), it selects
  // another backend, restores the snapshot there, replays the micro-batches
  // since, and returns the failed step's loss as if nothing happened,
  // logging what it did. 0: off. Not with a process group.
  int snapshot_every = 0;
  // The backend to continue on; empty: the best usable one (its fallback
  // policy, MIXRT_FALLBACK, when that names a usable backend).
  std::string failover_backend;
};

struct EvalResult {
  double loss = 0;
  double accuracy = 0;  // Argmax accuracy when targets are class indices.
};

class Trainer {
 public:
  Trainer(std::shared_ptr<nn::Module> model,
          std::unique_ptr<Optimizer> optimizer, Criterion criterion,
          Device device, TrainerOptions options = {});

  bool amp_enabled() const { return amp_; }
  // Why AMP is on or off, in words.
  const std::string& amp_reason() const { return amp_reason_; }
  GradScaler& scaler() { return *scaler_; }
  Optimizer& optimizer() { return *optimizer_; }
  int64_t step() const { return step_; }
  // Where training runs now: the constructor's device until a failover.
  // Make each batch on it (a failed backend takes no new tensors).
  const Device& device() const { return device_; }
  // Each failover so far, in words ("cpu failed (crashed: SIGSEGV in
  // matmul); restored step 40 onto reference:0, replayed 3 micro-batches").
  const std::vector<std::string>& failovers() const { return failovers_; }
  // Moves training to `device` between optimizer steps, as a failover does
  // (a snapshot taken now, restored there, the scaler and the compiled
  // forward made again): what "a run that switched backends at step k" is.
  // FAILED_PRECONDITION in the middle of an accumulation.
  absl::Status switch_device(const Device& device);
  // With TrainerOptions::compile: what the compiler made of the model's
  // forward in its current mode (CompiledFunction::Explain); else "".
  std::string CompileExplain() const;

  // One micro-batch: forward under autocast, scaled backward, and every
  // accumulation_steps micro-batches the (scaled, clipped) optimizer step.
  // Returns the loss on the device, detached: reading it (item()) waits for
  // the device, so a loop reads it only when it logs.
  absl::StatusOr<Tensor> train_step(const Tensor& input, const Tensor& target);
  // Loss and accuracy under inference mode (and autocast when AMP is on).
  absl::StatusOr<EvalResult> evaluate(const std::vector<Tensor>& inputs,
                                      const std::vector<Tensor>& targets);
  // Names of parameters whose gradients are inf/NaN right now (after an
  // unscale): the first thing to look at when a scaled step keeps skipping.
  absl::StatusOr<std::vector<std::string>> non_finite_gradients() const;

  // Checks `path` can be written and locks it for this trainer's lifetime
  // (see ClaimCheckpointPath): call it before training so a bad path fails
  // at once. save_checkpoint claims its path itself when not yet claimed.
  // With a process group only rank 0 (the writer) claims, and every rank
  // must call it: each returns rank 0's outcome.
  absl::Status claim_checkpoint_path(const std::string& path);
  absl::Status save_checkpoint(const std::string& path);
  absl::Status load_checkpoint(const std::string& path);

 private:
  // Claims `path` in this process (save_checkpoint on rank 0 alone).
  absl::Status ClaimLocally(const std::string& path);
  AutocastOptions Autocast() const;

  std::shared_ptr<nn::Module> model_;
  std::optional<CompiledModule<nn::Module>> compiled_;
  std::shared_ptr<distributed::DistributedDataParallel> ddp_;
  absl::StatusOr<Tensor> Forward(const Tensor& input);
  // One micro-batch on device_ (what train_step did before snapshots).
  absl::StatusOr<Tensor> StepOnce(const Tensor& input, const Tensor& target);
  // Takes a snapshot when one is due (at an optimizer step boundary).
  absl::Status MaybeSnapshot();
  // Selects the next backend, restores the snapshot there and replays the
  // recorded micro-batches; returns the last one's loss. `why` is the
  // failed step's error.
  absl::StatusOr<Tensor> FailOver(const absl::Status& why);
  absl::StatusOr<Device> FailoverDevice() const;
  // Restores `snapshot` onto `device` and makes it the trainer's device.
  absl::Status RestoreOnto(const TrainingSnapshot& snapshot,
                           const Device& device);
  GradScalerOptions scaler_options_;
  // Wraps the model in DDP once, on every rank at the same call.
  absl::Status EnsureDistributed();
  std::unique_ptr<Optimizer> optimizer_;
  Criterion criterion_;
  Device device_;
  TrainerOptions options_;
  bool amp_ = false;
  std::string amp_reason_;
  std::unique_ptr<GradScaler> scaler_;
  int64_t step_ = 0;
  int micro_ = 0;
  std::map<std::string, files::FileLock> claimed_;  // By checkpoint path.
  // With snapshot_every: the last snapshot and each micro-batch since (its
  // data and the learning rates it ran with).
  struct RecordedBatch {
    HostTensor input, target;
    std::vector<double> group_lrs;
  };
  std::optional<TrainingSnapshot> snapshot_;
  std::vector<RecordedBatch> since_snapshot_;
  std::vector<std::string> failovers_;
};

}  // namespace mixrt

#endif  // MIXRT_CORE_TRAIN_TRAINER_H_
