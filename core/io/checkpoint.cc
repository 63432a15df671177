#include "core/io/checkpoint.h"

#include <fcntl.h>
#include <unistd.h>
#include <zlib.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
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

absl::Status Errno(absl::string_view what, const std::string& path) {
  return absl::InternalError(
      absl::StrCat(what, " ", path, ": ", std::strerror(errno)));
}

absl::Status WriteAll(int fd, const std::string& data,
                      const std::string& path) {
  size_t done = 0;
  while (done < data.size()) {
    const ssize_t n = ::write(fd, data.data() + done, data.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      return Errno("cannot write", path);
    }
    done += static_cast<size_t>(n);
  }
  return absl::OkStatus();
}

std::string Serialize(const Checkpoint& ckpt, absl::Status* status) {
  nlohmann::json header = {{"version", 1},
                           {"entries", nlohmann::json::array()},
                           {"scalars", nlohmann::json::object()}};
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
  for (const auto& [name, v] : ckpt.scalars) header["scalars"][name] = v;
  const std::string h = header.dump();
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
  // Write beside the target and rename over it: a crash at any point leaves
  // either the old file or the new one, never a mix.
  const std::string tmp = absl::StrCat(path, ".tmp.", ::getpid());
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) return Errno("cannot create", tmp);
  absl::Status written = WriteAll(fd, data, tmp);
  if (written.ok() && ::fsync(fd) != 0) written = Errno("cannot fsync", tmp);
  ::close(fd);
  if (!written.ok()) {
    ::unlink(tmp.c_str());
    return written;
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    const absl::Status s = Errno("cannot rename into", path);
    ::unlink(tmp.c_str());
    return s;
  }
  const size_t slash = path.rfind('/');
  const std::string dir =
      slash == std::string::npos ? "." : path.substr(0, slash);
  const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY);
  if (dfd >= 0) {
    ::fsync(dfd);  // Makes the rename itself durable.
    ::close(dfd);
  }
  return absl::OkStatus();
}

absl::StatusOr<Checkpoint> LoadCheckpoint(const std::string& path,
                                          const Device& device) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    return absl::NotFoundError(absl::StrCat("cannot open checkpoint ", path));
  std::stringstream buffer;
  buffer << in.rdbuf();
  return ParseCheckpoint(buffer.str(), path, device);
}

absl::StatusOr<Checkpoint> ParseCheckpoint(absl::string_view data,
                                           absl::string_view path,
                                           const Device& device) {
  const auto refuse = [&](absl::string_view why) {
    return absl::DataLossError(
        absl::StrCat("checkpoint ", path, " is refused: ", why));
  };
  const size_t min_size = kMagicSize + sizeof(uint64_t) + 4 + kMagicSize;
  if (data.size() < min_size) return refuse("it is truncated (too short)");
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
  const size_t body_at = kMagicSize + sizeof(uint64_t) + header_size;
  if (header_size > kMaxHeader || body_at > crc_at) {
    return refuse("its header size is out of bounds");
  }
  const nlohmann::json header = nlohmann::json::parse(
      data.substr(kMagicSize + sizeof(uint64_t), header_size), nullptr, false);
  if (header.is_discarded() || !header.is_object() ||
      !header.contains("entries") || !header["entries"].is_array()) {
    return refuse("its header is not valid");
  }
  Checkpoint ckpt;
  const size_t body_size = crc_at - body_at;
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
        ckpt.scalars[k] = v.get<double>();
      }
    }
  } catch (const nlohmann::json::exception& e) {
    return refuse(absl::StrCat("its header is malformed: ", e.what()));
  }
  return ckpt;
}

absl::Status SaveTrainingCheckpoint(const std::string& path,
                                    const TrainingState& state) {
  if (state.model == nullptr) {
    return absl::InvalidArgumentError("SaveTrainingCheckpoint: no model");
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
    ckpt.scalars["rng.seed"] = static_cast<double>(state.generator->seed());
    ckpt.scalars["rng.offset"] = static_cast<double>(state.generator->offset());
  }
  ckpt.scalars["step"] = static_cast<double>(state.step);
  return SaveCheckpoint(path, ckpt);
}

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
  // Check everything before changing anything.
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
  for (const auto& [name, t] : targets) {
    const Tensor& src = ckpt.tensors.at("model." + name);
    MIXRT_RETURN_IF_ERROR(t.device().backend()->Copy(
        t.device().index(), MIXRT_COPY_DEVICE_TO_DEVICE, t.data_ptr(),
        src.data_ptr(), t.numel() * DTypeSize(t.dtype())));
  }
  if (state.optimizer != nullptr) {
    std::map<std::string, Tensor> optim;
    for (const auto& [name, t] : ckpt.tensors) {
      if (name.rfind("optim.", 0) == 0) optim[name.substr(6)] = t;
    }
    MIXRT_RETURN_IF_ERROR(state.optimizer->load_state_dict(optim));
    auto lr = ckpt.scalars.find("optim.lr");
    if (lr != ckpt.scalars.end()) state.optimizer->set_lr(lr->second);
  }
  if (state.scaler != nullptr && ckpt.scalars.count("scaler.scale") > 0) {
    std::map<std::string, double> s;
    for (const auto& [k, v] : ckpt.scalars) {
      if (k.rfind("scaler.", 0) == 0) s[k.substr(7)] = v;
    }
    MIXRT_RETURN_IF_ERROR(state.scaler->load_state_dict(s));
  }
  if (state.generator != nullptr && ckpt.scalars.count("rng.seed") > 0) {
    state.generator->set_state(
        static_cast<uint64_t>(ckpt.scalars.at("rng.seed")),
        static_cast<uint64_t>(ckpt.scalars.at("rng.offset")));
  }
  state.step = static_cast<int64_t>(ckpt.scalars["step"]);
  return absl::OkStatus();
}

}  // namespace mixrt
