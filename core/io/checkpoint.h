// Checkpoints: named tensors plus scalar metadata in one file, written
// atomically (temporary file, fsync, rename, fsync of the directory) with a
// CRC-32 over the whole content, and verified on load: a truncated,
// corrupted or mismatched file is refused with a message and the previous
// checkpoint stays intact.
//
// File layout: checkpoint_format.h.
#ifndef MIXRT_CORE_IO_CHECKPOINT_H_
#define MIXRT_CORE_IO_CHECKPOINT_H_

#include <map>
#include <string>

#include "absl/status/statusor.h"
#include "common/file_lock.h"
#include "core/amp/grad_scaler/grad_scaler.h"
#include "core/nn/module.h"
#include "core/optim/optimizer.h"
#include "core/tensor/generator.h"
#include "core/tensor/tensor.h"

namespace mixrt {

struct Checkpoint {
  std::map<std::string, Tensor> tensors;
  std::map<std::string, double> scalars;     // Finite values only.
  std::map<std::string, uint64_t> integers;  // Exact (steps, RNG state).
};

// Writes atomically (see common/atomic_write.h for what happens to symlinks
// and non-regular targets), and reads the written file back and verifies it
// before it replaces the old one. Refuses non-finite scalars.
absl::Status SaveCheckpoint(const std::string& path, const Checkpoint& ckpt);
// Tensors are created on `device`. Only a regular file is read (a FIFO or a
// device is refused, never waited on). The file is streamed: magic and end
// marker first, the CRC in 1 MiB chunks, then one entry at a time, so peak
// host memory is its tensors plus one entry; running out of memory is
// reported as ResourceExhausted, never as a damaged file.
absl::StatusOr<Checkpoint> LoadCheckpoint(const std::string& path,
                                          const Device& device);
// LoadCheckpoint on bytes already read; `path` only names the file in
// errors. Every field is validated (fuzz/checkpoint_fuzz.cc).
absl::StatusOr<Checkpoint> ParseCheckpoint(absl::string_view data,
                                           absl::string_view path,
                                           const Device& device);

// Everything a training run needs to resume: model parameters and buffers
// ("model."), optimizer state ("optim.", lr), scaler state ("scaler.", when
// enabled), step and the generator's seed and offset.
struct TrainingState {
  nn::Module* model = nullptr;
  Optimizer* optimizer = nullptr;  // Optional.
  GradScaler* scaler = nullptr;    // Optional.
  Generator* generator = nullptr;  // Optional.
  int64_t step = 0;
  // Further integers of the run (the world size of a data-parallel run),
  // stored as "meta.<name>"; a load replaces them with the file's.
  std::map<std::string, uint64_t> metadata;
};

// Refuses a negative step.
absl::Status SaveTrainingCheckpoint(const std::string& path,
                                    const TrainingState& state);
// Restores into the existing model, optimizer, scaler and generator.
// Everything (tensor names, shapes and dtypes, optimizer state, lr, scaler
// state, step and RNG ranges) is validated before anything is modified: a
// failed load changes nothing. A checkpoint without scaler state still
// loads (the scaler keeps its own).
absl::Status LoadTrainingCheckpoint(const std::string& path,
                                    TrainingState& state);

// Claims `path` for one run's checkpoints, before training starts: checks
// that it can be written (a read-only or missing directory, or a target that
// is not a regular file, is reported now, not after the first epoch) and
// takes an advisory lock on "<path>.lock" for as long as the returned lock
// lives, so a second run writing the same path is refused with the first
// one's pid instead of interleaving with it.
absl::StatusOr<files::FileLock> ClaimCheckpointPath(const std::string& path);

}  // namespace mixrt

#endif  // MIXRT_CORE_IO_CHECKPOINT_H_
