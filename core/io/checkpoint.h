// Checkpoints: named tensors plus scalar metadata in one file, written
// atomically (temporary file, fsync, rename, fsync of the directory) with a
// CRC-32 over the whole content, and verified on load: a truncated,
// corrupted or mismatched file is refused with a message and the previous
// checkpoint stays intact.
//
// File layout: "MIXRTCK1" | u64 header length | JSON header (entries with
// name, dtype, shape, offset, bytes; scalars) | tensor bytes | u32 CRC-32 of
// everything before it | "MIXRTEND".
#ifndef MIXRT_CORE_IO_CHECKPOINT_H_
#define MIXRT_CORE_IO_CHECKPOINT_H_

#include <map>
#include <string>

#include "absl/status/statusor.h"
#include "core/amp/grad_scaler.h"
#include "core/nn/module.h"
#include "core/optim/optimizer.h"
#include "core/tensor/generator.h"
#include "core/tensor/tensor.h"

namespace mixrt {

struct Checkpoint {
  std::map<std::string, Tensor> tensors;
  std::map<std::string, double> scalars;
};

absl::Status SaveCheckpoint(const std::string& path, const Checkpoint& ckpt);
// Tensors are created on `device`.
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
};

absl::Status SaveTrainingCheckpoint(const std::string& path,
                                    const TrainingState& state);
// Restores into the existing model, optimizer, scaler and generator. Every
// tensor is checked (names, shapes, dtypes) before anything is modified. A
// checkpoint without scaler state still loads (the scaler keeps its own).
absl::Status LoadTrainingCheckpoint(const std::string& path,
                                    TrainingState& state);

}  // namespace mixrt

#endif  // MIXRT_CORE_IO_CHECKPOINT_H_
