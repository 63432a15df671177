#include "core/io/checkpoint.h"

#include <zlib.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <optional>

#include "absl/strings/str_cat.h"
#include "common/atomic_write.h"
#include "common/regular_file_read.h"
#include "core/tensor/factories.h"
#include "mixrt/status_macros.h"
#include "nlohmann/json.hpp"

namespace mixrt {
namespace {

constexpr char kMagic[] = "MIXRTCK1";
constexpr char kEndMagic[] = "MIXRTEND";
constexpr size_t kMagicSize = 8;
// A header or file this large is not one we wrote.
constexpr uint64_t kMaxHeader = 64 << 20;
// 2 added "integers" (exact 64-bit values); 1 is still read.
constexpr int kVersion = 2;
constexpr size_t kMinSize = kMagicSize + sizeof(uint64_t) + 4 + kMagicSize;

// Where the parts of a checkpoint's bytes are, once its framing, CRC and
// header are verified.
struct Layout {
  nlohmann::json header;
  size_t body_at = 0;
  size_t body_size = 0;
};

absl::StatusOr<Layout> ParseLayout(absl::string_view data,
                                   absl::string_view path) {
  const auto refuse = [&](absl::string_view why) {
    return absl::DataLossError(
        absl::StrCat("checkpoint ", path, " is refused: ", why));
  };
  if (data.size() < kMinSize) return refuse("it is truncated (too short)");
  if (data.compare(0, kMagicSize, kMagic) != 0) {
    return refuse("it is not a mixrt checkpoint (bad magic)");
  }
  if (data.compare(data.size() - kMagicSize, kMagicSize, kEndMagic) != 0) {
    return refuse("it is truncated (no end marker)");
  }
  const size_t crc_at = data.size() - kMagicSize - 4;
  uint32_t stored;
  std::memcpy(&stored, data.data() + crc_at, 4);
  const uint32_t actual = static_cast<uint32_t>(
      crc32(0L, reinterpret_cast<const Bytef*>(data.data()), crc_at));
  if (stored != actual) {
    return refuse(absl::StrCat("its CRC-32 is ", actual, " but ", stored,
                               " was recorded (the file is corrupted)"));
  }
  uint64_t header_size;
  std::memcpy(&header_size, data.data() + kMagicSize, sizeof(header_size));
  if (header_size > kMaxHeader ||
      kMagicSize + sizeof(uint64_t) + header_size > crc_at) {
    return refuse("its header size is out of bounds");
  }
  Layout layout;
  layout.body_at = kMagicSize + sizeof(uint64_t) + header_size;
  layout.body_size = crc_at - layout.body_at;
  layout.header = nlohmann::json::parse(
      data.substr(kMagicSize + sizeof(uint64_t), header_size), nullptr, false);
  const nlohmann::json& h = layout.header;
  if (h.is_discarded() || !h.is_object() || !h.contains("entries") ||
      !h["entries"].is_array()) {
    return refuse("its header is not valid");
  }
  if (h.contains("version") &&
      (!h["version"].is_number_unsigned() || h["version"].get<uint64_t>() < 1 ||
       h["version"].get<uint64_t>() > kVersion)) {
    return refuse(absl::StrCat("its format version is ", h["version"].dump(),
                               "; this mixrt reads versions 1 to ", kVersion));
  }
  return layout;
}

std::string Serialize(const Checkpoint& ckpt, absl::Status* status) {
  nlohmann::json header = {{"version", kVersion},
                           {"entries", nlohmann::json::array()},
                           {"scalars", nlohmann::json::object()},
                           {"integers", nlohmann::json::object()}};
  std::string body;
  for (const auto& [name, t] : ckpt.tensors) {
    absl::StatusOr<std::vector<uint8_t>> bytes = t.to_bytes();
    if (!bytes.ok()) {
      *status = bytes.status();
      return "";
    }
    header["entries"].push_back(
        {{"name", name},
         {"dtype", std::string(DTypeName(t.dtype()))},
         {"shape", std::vector<int64_t>(t.shape().begin(), t.shape().end())},
         {"offset", body.size()},
         {"bytes", bytes->size()}});
    body.append(reinterpret_cast<const char*>(bytes->data()), bytes->size());
  }
  for (const auto& [name, v] : ckpt.scalars) {
    // JSON has no NaN or inf (they would be written as null and refused on
    // load): a checkpoint that cannot be loaded must never be written.
    if (!std::isfinite(v)) {
      *status = absl::InvalidArgumentError(absl::StrCat(
          "checkpoint scalar '", name, "' is ", v,
          "; only finite values can be saved"));
      return "";
    }
    header["scalars"][name] = v;
  }
  for (const auto& [name, v] : ckpt.integers) header["integers"][name] = v;
  std::string h;
  try {
    h = header.dump();
  } catch (const nlohmann::json::exception&) {
    // Names are kept exactly; one that is not UTF-8 cannot be stored.
    *status = absl::InvalidArgumentError(
        "a checkpoint tensor or scalar name is not valid UTF-8");
    return "";
  }
  std::string out(kMagic, kMagicSize);
  const uint64_t hl = h.size();
  out.append(reinterpret_cast<const char*>(&hl), sizeof(hl));
  out += h;
  out += body;
  const uint32_t crc = static_cast<uint32_t>(
      crc32(0L, reinterpret_cast<const Bytef*>(out.data()), out.size()));
  out.append(reinterpret_cast<const char*>(&crc), sizeof(crc));
  out.append(kEndMagic, kMagicSize);
  return out;
}

}  // namespace

absl::Status SaveCheckpoint(const std::string& path, const Checkpoint& ckpt) {
  absl::Status status;
  const std::string data = Serialize(ckpt, &status);
  MIXRT_RETURN_IF_ERROR(status);
  // What was written is read back and checked before it replaces the old
  // file, so a good checkpoint is never replaced by one that cannot load.
  const auto verify = [&](const std::string& tmp) -> absl::Status {
    MIXRT_ASSIGN_OR_RETURN(const std::string written,
                           files::ReadRegularFile(tmp, data.size()));
    if (written != data) {
      return absl::DataLossError(absl::StrCat(
          "checkpoint ", path, " was not saved: ", tmp,
          " read back differs from what was written"));
    }
    return ParseLayout(written, tmp).status();
  };
  return files::WriteFileAtomically(path, data, 0644, verify);
}

absl::StatusOr<Checkpoint> LoadCheckpoint(const std::string& path,
                                          const Device& device) {
  MIXRT_ASSIGN_OR_RETURN(files::RegularFile file,
                         files::RegularFile::Open(path));
  // The magic is checked before the file is read into memory: a large file
  // that is not a checkpoint costs nothing.
  char magic[kMagicSize];
  if (file.size() < kMinSize) {
    return absl::DataLossError(absl::StrCat(
        "checkpoint ", path, " is refused: it is truncated (too short)"));
  }
  MIXRT_RETURN_IF_ERROR(file.ReadAt(0, magic, kMagicSize));
  if (std::memcmp(magic, kMagic, kMagicSize) != 0) {
    return absl::DataLossError(
        absl::StrCat("checkpoint ", path,
                     " is refused: it is not a mixrt checkpoint (bad magic)"));
  }
  MIXRT_ASSIGN_OR_RETURN(const std::string data, file.ReadAll());
  return ParseCheckpoint(data, path, device);
}

absl::StatusOr<Checkpoint> ParseCheckpoint(absl::string_view data,
                                           absl::string_view path,
                                           const Device& device) {
  const auto refuse = [&](absl::string_view why) {
    return absl::DataLossError(
        absl::StrCat("checkpoint ", path, " is refused: ", why));
  };
  MIXRT_ASSIGN_OR_RETURN(const Layout layout, ParseLayout(data, path));
  const nlohmann::json& header = layout.header;
  const size_t body_at = layout.body_at;
  const size_t body_size = layout.body_size;
  Checkpoint ckpt;
  try {
    for (const auto& e : header["entries"]) {
      const std::string name = e.at("name").get<std::string>();
      MIXRT_ASSIGN_OR_RETURN(DType dtype,
                             ParseDType(e.at("dtype").get<std::string>()));
      const std::vector<int64_t> shape =
          e.at("shape").get<std::vector<int64_t>>();
      const uint64_t offset = e.at("offset").get<uint64_t>();
      const uint64_t bytes = e.at("bytes").get<uint64_t>();
      MIXRT_ASSIGN_OR_RETURN(const int64_t n, CheckedNumElements(shape));
      if (offset > body_size || bytes > body_size - offset ||
          bytes % DTypeSize(dtype) != 0 ||
          bytes / DTypeSize(dtype) != static_cast<uint64_t>(n)) {
        return refuse(absl::StrCat("entry '", name, "' is out of bounds"));
      }
      const auto* p =
          reinterpret_cast<const uint8_t*>(data.data() + body_at + offset);
      MIXRT_ASSIGN_OR_RETURN(
          ckpt.tensors[name],
          from_bytes(absl::MakeConstSpan(p, bytes), shape, dtype, device));
    }
    if (header.contains("scalars")) {
      for (const auto& [k, v] : header["scalars"].items()) {
        const double d = v.get<double>();
        if (!v.is_number() || !std::isfinite(d)) {
          return refuse(absl::StrCat("scalar '", k, "' is ", v.dump(),
                                     "; expected a finite number"));
        }
        ckpt.scalars[k] = d;
      }
    }
    if (header.contains("integers")) {
      for (const auto& [k, v] : header["integers"].items()) {
        // Non-negative integers parse as unsigned; a negative or fractional
        // value, or one past 2^64, is not one we wrote.
        if (!v.is_number_unsigned()) {
          return refuse(absl::StrCat("integer '", k, "' is ", v.dump(),
                                     "; expected an integer in [0, 2^64)"));
        }
        ckpt.integers[k] = v.get<uint64_t>();
      }
    }
  } catch (const nlohmann::json::exception& e) {
    return refuse(absl::StrCat("its header is malformed: ", e.what()));
  }
  return ckpt;
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
        src.data_ptr(), t.numel() * DTypeSize(t.dtype())));
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
  return absl::OkStatus();
}

}  // namespace mixrt
