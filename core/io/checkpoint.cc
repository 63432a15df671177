#include "core/io/checkpoint.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <optional>

#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/atomic_write.h"
#include "common/regular_file_read.h"
#include "core/io/checkpoint_format.h"
#include "core/tensor/factories.h"
#include "mixrt/status_macros.h"

namespace mixrt {
namespace {

checkpoint_format::ReadAtFn ReadFrom(const files::RegularFile& file) {
  return [&file](uint64_t offset, void* out, size_t n) {
    return file.ReadAt(offset, out, n);
  };
}

}  // namespace

absl::Status SaveCheckpoint(const std::string& path, const Checkpoint& ckpt) {
  MIXRT_ASSIGN_OR_RETURN(const std::string data,
                         checkpoint_format::Serialize(ckpt));
  // The written file is read back (its CRC and header checked, streamed)
  // before it replaces the old one, so a good checkpoint is never replaced
  // by one that cannot load.
  const auto verify = [&](const std::string& tmp) -> absl::Status {
    MIXRT_ASSIGN_OR_RETURN(files::RegularFile file,
                           files::RegularFile::Open(tmp));
    if (file.size() != data.size()) {
      return absl::DataLossError(
          absl::StrCat("checkpoint ", path, " was not saved: ", tmp, " holds ",
                       file.size(), " bytes of the ", data.size(), " written"));
    }
    return checkpoint_format::ReadLayout(file.size(), ReadFrom(file), tmp)
        .status();
  };
  return files::WriteFileAtomically(path, data, 0644, verify);
}

absl::StatusOr<Checkpoint> LoadCheckpoint(const std::string& path,
                                          const Device& device) {
  MIXRT_ASSIGN_OR_RETURN(files::RegularFile file,
                         files::RegularFile::Open(path));
  MIXRT_ASSIGN_OR_RETURN(
      const checkpoint_format::Layout layout,
      checkpoint_format::ReadLayout(file.size(), ReadFrom(file), path));
  return checkpoint_format::ReadContents(layout, ReadFrom(file), path, device);
}

absl::StatusOr<Checkpoint> ParseCheckpoint(absl::string_view data,
                                           absl::string_view path,
                                           const Device& device) {
  const checkpoint_format::ReadAtFn read = [data](uint64_t offset, void* out,
                                                  size_t n) {
    std::memcpy(out, data.data() + offset, n);  // Bounds checked by callers.
    return absl::OkStatus();
  };
  MIXRT_ASSIGN_OR_RETURN(
      const checkpoint_format::Layout layout,
      checkpoint_format::ReadLayout(data.size(), read, path));
  return checkpoint_format::ReadContents(layout, read, path, device);
}

absl::StatusOr<files::FileLock> ClaimCheckpointPath(const std::string& path) {
  MIXRT_RETURN_IF_ERROR(files::CheckCanCreate(path));
  return files::FileLock::Acquire(path);
}

absl::Status SaveTrainingCheckpoint(const std::string& path,
                                    const TrainingState& state) {
  if (state.model == nullptr) {
    return absl::InvalidArgumentError("SaveTrainingCheckpoint: no model");
  }
  if (state.step < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "SaveTrainingCheckpoint: step is ", state.step, "; expected >= 0"));
  }
  Checkpoint ckpt;
  for (const auto& [name, t] : state.model->named_parameters()) {
    ckpt.tensors["model." + name] = t;
  }
  for (const auto& [name, t] : state.model->named_buffers()) {
    ckpt.tensors["model." + name] = t;
  }
  if (state.optimizer != nullptr) {
    for (const auto& [name, t] : state.optimizer->state_dict()) {
      ckpt.tensors["optim." + name] = t;
    }
    ckpt.scalars["optim.lr"] = state.optimizer->lr();
  }
  if (state.scaler != nullptr && state.scaler->is_enabled()) {
    MIXRT_ASSIGN_OR_RETURN(auto scaler_state, state.scaler->state_dict());
    for (const auto& [k, v] : scaler_state) ckpt.scalars["scaler." + k] = v;
  }
  if (state.generator != nullptr) {
    ckpt.integers["rng.seed"] = state.generator->seed();
    ckpt.integers["rng.offset"] = state.generator->offset();
  }
  ckpt.integers["step"] = static_cast<uint64_t>(state.step);
  for (const auto& [name, value] : state.metadata) {
    ckpt.integers["meta." + name] = value;
  }
  return SaveCheckpoint(path, ckpt);
}

namespace {

// An integer field, from "integers", or from "scalars" in version-1 files
// (stored as doubles: exact up to 2^53). Range-checked: a value a double
// cannot hold exactly, or past `max`, is refused.
absl::StatusOr<std::optional<uint64_t>> IntegerField(const Checkpoint& ckpt,
                                                     const std::string& name,
                                                     uint64_t max,
                                                     const std::string& path) {
  const auto refuse = [&](const std::string& value) {
    return absl::DataLossError(
        absl::StrCat("checkpoint ", path, " is refused: '", name, "' is ",
                     value, "; expected an integer in [0, ", max, "]"));
  };
  if (auto it = ckpt.integers.find(name); it != ckpt.integers.end()) {
    if (it->second > max) return refuse(absl::StrCat(it->second));
    return std::optional<uint64_t>(it->second);
  }
  if (auto it = ckpt.scalars.find(name); it != ckpt.scalars.end()) {
    const double v = it->second;
    constexpr double kExact = 9007199254740992.0;  // 2^53
    if (!(v >= 0) || v > kExact || v != std::floor(v) ||
        static_cast<uint64_t>(v) > max) {
      return refuse(absl::StrCat(v));
    }
    return std::optional<uint64_t>(static_cast<uint64_t>(v));
  }
  return std::optional<uint64_t>();
}

}  // namespace

absl::Status LoadTrainingCheckpoint(const std::string& path,
                                    TrainingState& state) {
  if (state.model == nullptr) {
    return absl::InvalidArgumentError("LoadTrainingCheckpoint: no model");
  }
  std::vector<std::pair<std::string, Tensor>> targets =
      state.model->named_parameters();
  for (auto& b : state.model->named_buffers()) targets.push_back(b);
  if (targets.empty()) {
    return absl::InvalidArgumentError(
        "LoadTrainingCheckpoint: the model is empty");
  }
  MIXRT_ASSIGN_OR_RETURN(Checkpoint ckpt,
                         LoadCheckpoint(path, targets[0].second.device()));
  // Validate everything before changing anything.
  for (const auto& [name, t] : targets) {
    auto it = ckpt.tensors.find("model." + name);
    if (it == ckpt.tensors.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat("checkpoint ", path,
                       " has no tensor for model parameter '", name, "'"));
    }
    if (it->second.shape() != t.shape() || it->second.dtype() != t.dtype()) {
      return absl::InvalidArgumentError(
          absl::StrCat("checkpoint ", path, ": '", name, "' is ",
                       DTypeName(it->second.dtype()), " ",
                       ShapeToString(it->second.shape()), " but the model has ",
                       DTypeName(t.dtype()), " ", ShapeToString(t.shape())));
    }
  }
  std::map<std::string, Tensor> optim;
  std::optional<double> lr;
  if (state.optimizer != nullptr) {
    for (const auto& [name, t] : ckpt.tensors) {
      if (name.rfind("optim.", 0) == 0) optim[name.substr(6)] = t;
    }
    MIXRT_RETURN_IF_ERROR(state.optimizer->check_state_dict(optim));
    if (auto it = ckpt.scalars.find("optim.lr"); it != ckpt.scalars.end()) {
      MIXRT_RETURN_IF_ERROR(CheckLearningRate(it->second));
      lr = it->second;
    }
  }
  std::map<std::string, double> scaler;
  const bool load_scaler =
      state.scaler != nullptr && ckpt.scalars.count("scaler.scale") > 0;
  if (load_scaler) {
    for (const auto& [k, v] : ckpt.scalars) {
      if (k.rfind("scaler.", 0) == 0) scaler[k.substr(7)] = v;
    }
    MIXRT_RETURN_IF_ERROR(state.scaler->check_state_dict(scaler));
  }
  constexpr uint64_t kU64Max = std::numeric_limits<uint64_t>::max();
  MIXRT_ASSIGN_OR_RETURN(const std::optional<uint64_t> seed,
                         IntegerField(ckpt, "rng.seed", kU64Max, path));
  MIXRT_ASSIGN_OR_RETURN(const std::optional<uint64_t> offset,
                         IntegerField(ckpt, "rng.offset", kU64Max, path));
  MIXRT_ASSIGN_OR_RETURN(
      const std::optional<uint64_t> step,
      IntegerField(ckpt, "step", std::numeric_limits<int64_t>::max(), path));

  for (const auto& [name, t] : targets) {
    const Tensor& src = ckpt.tensors.at("model." + name);
    MIXRT_RETURN_IF_ERROR(t.device().backend()->Copy(
        t.device().index(), MIXRT_COPY_DEVICE_TO_DEVICE, t.data_ptr(),
        src.const_data_ptr(), t.numel() * DTypeSize(t.dtype())));
    t.storage()->BumpVersion();
  }
  if (state.optimizer != nullptr) {
    MIXRT_RETURN_IF_ERROR(state.optimizer->load_state_dict(optim));
    if (lr.has_value()) MIXRT_RETURN_IF_ERROR(state.optimizer->set_lr(*lr));
  }
  if (load_scaler) MIXRT_RETURN_IF_ERROR(state.scaler->load_state_dict(scaler));
  if (state.generator != nullptr && seed.has_value()) {
    state.generator->set_state(*seed, offset.value_or(0));
  }
  state.step = static_cast<int64_t>(step.value_or(0));
  state.metadata.clear();
  for (const auto& [name, value] : ckpt.integers) {
    if (absl::StartsWith(name, "meta.")) {
      state.metadata[name.substr(5)] = value;
    }
  }
  return absl::OkStatus();
}

}  // namespace mixrt
