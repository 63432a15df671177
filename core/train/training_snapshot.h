// A copy, in this process's memory, of what a training run needs to go on
// from a step: the model's parameters and buffers, the optimizer's state and
// learning rates, the GradScaler's state, the default generator's position
// (dropout's masks replay as they ran: Philox is counter-based). Taken every
// few steps by the Trainer (TrainerOptions::snapshot_every) so that when its
// backend fails (an out-of-process plugin that crashed or hung: UNAVAILABLE),
// it can restore the run onto another backend and continue. Cheap: one device
// to host copy per tensor, nothing written to disk.
#ifndef MIXRT_CORE_TRAIN_TRAINING_SNAPSHOT_H_
#define MIXRT_CORE_TRAIN_TRAINING_SNAPSHOT_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/amp/grad_scaler/grad_scaler.h"
#include "core/nn/module.h"
#include "core/optim/optimizer.h"

namespace mixrt {

// One tensor's contents in host memory.
struct HostTensor {
  DType dtype = DType::kF32;
  std::vector<int64_t> shape;
  std::vector<uint8_t> bytes;

  static absl::StatusOr<HostTensor> Of(const Tensor& t);
  // A new tensor on `device` holding these contents.
  absl::StatusOr<Tensor> On(const Device& device) const;
};

class TrainingSnapshot {
 public:
  // `scaler` may be null.
  static absl::StatusOr<TrainingSnapshot> Take(const nn::Module& model,
                                               const Optimizer& optimizer,
                                               const GradScaler* scaler,
                                               int64_t step);

  // Puts the run back as it was at the snapshot, on `device`: the model's
  // parameters and buffers are replaced in place (Tensor::set_data, so every
  // handle on them, the optimizer's included, follows) and lose their
  // gradients; the optimizer's state is loaded onto `device`; the learning
  // rates and the default generator are set back. Everything is copied to
  // `device` before anything is replaced: a failure changes nothing.
  absl::Status Restore(nn::Module& model, Optimizer& optimizer,
                       const Device& device) const;

  int64_t step() const { return step_; }
  // Empty when the run had no (enabled) scaler.
  const std::map<std::string, double>& scaler_state() const {
    return scaler_state_;
  }

 private:
  std::vector<std::pair<std::string, HostTensor>> parameters_;
  std::vector<std::pair<std::string, HostTensor>> buffers_;
  std::vector<std::pair<std::string, HostTensor>> optimizer_state_;
  std::vector<double> group_lrs_;
  std::map<std::string, double> scaler_state_;
  uint64_t rng_seed_ = 0, rng_offset_ = 0;
  int64_t step_ = 0;
};

}  // namespace mixrt

#endif  // MIXRT_CORE_TRAIN_TRAINING_SNAPSHOT_H_
