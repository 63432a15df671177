#include "core/io/checkpoint_format.h"

#include <zlib.h>

#include <cmath>
#include <cstring>
#include <new>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "common/memory_budget.h"
#include "core/tensor/factories.h"
#include "mixrt/status_macros.h"

namespace mixrt::checkpoint_format {
namespace {

constexpr char kMagic[] = "MIXRTCK1";
constexpr char kEndMagic[] = "MIXRTEND";
constexpr size_t kMagicSize = 8;
// A header this large is not one we wrote.
constexpr uint64_t kMaxHeader = 64 << 20;
// 2 added "integers" (exact 64-bit values); 1 is still read.
constexpr int kVersion = 2;
constexpr size_t kMinSize = kMagicSize + sizeof(uint64_t) + 4 + kMagicSize;
// The CRC is computed in chunks of this size: memory stays flat.
constexpr size_t kCrcChunk = 1 << 20;

}  // namespace

absl::StatusOr<std::string> Serialize(const Checkpoint& ckpt) {
  nlohmann::json header = {{"version", kVersion},
                           {"entries", nlohmann::json::array()},
                           {"scalars", nlohmann::json::object()},
                           {"integers", nlohmann::json::object()}};
  std::string body;
  for (const auto& [name, t] : ckpt.tensors) {
    absl::StatusOr<std::vector<uint8_t>> bytes = t.to_bytes();
    if (!bytes.ok()) return bytes.status();
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
      return absl::InvalidArgumentError(
          absl::StrCat("checkpoint scalar '", name, "' is ", v,
                       "; only finite values can be saved"));
    }
    header["scalars"][name] = v;
  }
  for (const auto& [name, v] : ckpt.integers) header["integers"][name] = v;
  std::string h;
  try {
    h = header.dump();
  } catch (const nlohmann::json::exception&) {
    // Names are kept exactly; one that is not UTF-8 cannot be stored.
    return absl::InvalidArgumentError(
        "a checkpoint tensor or scalar name is not valid UTF-8");
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

absl::StatusOr<Layout> ReadLayout(uint64_t size, const ReadAtFn& read,
                                  absl::string_view path) {
  const auto refuse = [&](absl::string_view why) {
    return absl::DataLossError(
        absl::StrCat("checkpoint ", path, " is refused: ", why));
  };
  if (size < kMinSize) return refuse("it is truncated (too short)");
  char magic[kMagicSize];
  MIXRT_RETURN_IF_ERROR(read(0, magic, kMagicSize));
  if (std::memcmp(magic, kMagic, kMagicSize) != 0) {
    return refuse("it is not a mixrt checkpoint (bad magic)");
  }
  MIXRT_RETURN_IF_ERROR(read(size - kMagicSize, magic, kMagicSize));
  if (std::memcmp(magic, kEndMagic, kMagicSize) != 0) {
    return refuse("it is truncated (no end marker)");
  }
  const uint64_t crc_at = size - kMagicSize - 4;
  uint32_t stored;
  MIXRT_RETURN_IF_ERROR(read(crc_at, &stored, 4));
  std::vector<unsigned char> chunk(std::min<uint64_t>(kCrcChunk, crc_at));
  uLong actual = crc32(0L, Z_NULL, 0);
  for (uint64_t at = 0; at < crc_at; at += chunk.size()) {
    const size_t n =
        static_cast<size_t>(std::min<uint64_t>(chunk.size(), crc_at - at));
    MIXRT_RETURN_IF_ERROR(read(at, chunk.data(), n));
    actual = crc32(actual, chunk.data(), static_cast<uInt>(n));
  }
  if (stored != static_cast<uint32_t>(actual)) {
    return refuse(absl::StrCat("its CRC-32 is ", static_cast<uint32_t>(actual),
                               " but ", stored,
                               " was recorded (the file is corrupted)"));
  }
  uint64_t header_size;
  MIXRT_RETURN_IF_ERROR(read(kMagicSize, &header_size, sizeof(header_size)));
  if (header_size > kMaxHeader ||
      kMagicSize + sizeof(uint64_t) + header_size > crc_at) {
    return refuse("its header size is out of bounds");
  }
  std::string header_text(header_size, '\0');
  MIXRT_RETURN_IF_ERROR(
      read(kMagicSize + sizeof(uint64_t), header_text.data(), header_size));
  Layout layout;
  layout.body_at = kMagicSize + sizeof(uint64_t) + header_size;
  layout.body_size = crc_at - layout.body_at;
  layout.header = nlohmann::json::parse(header_text, nullptr, false);
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

absl::StatusOr<Checkpoint> ReadContents(const Layout& layout,
                                        const ReadAtFn& read,
                                        absl::string_view path,
                                        const Device& device) {
  const auto refuse = [&](absl::string_view why) {
    return absl::DataLossError(
        absl::StrCat("checkpoint ", path, " is refused: ", why));
  };
  const nlohmann::json& header = layout.header;
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
      if (offset > layout.body_size || bytes > layout.body_size - offset ||
          bytes % DTypeSize(dtype) != 0 ||
          bytes / DTypeSize(dtype) != static_cast<uint64_t>(n)) {
        return refuse(absl::StrCat("entry '", name, "' is out of bounds"));
      }
      MIXRT_RETURN_IF_ERROR(files::CheckFitsInMemory(
          bytes,
          absl::StrCat("loading entry '", name, "' of checkpoint ", path)));
      std::vector<uint8_t> buffer;
      try {
        buffer.resize(bytes);
      } catch (const std::bad_alloc&) {
        return absl::ResourceExhaustedError(absl::StrCat(
            "out of memory: loading entry '", name, "' of checkpoint ", path,
            " needs ", bytes, " bytes (the file itself was not judged)"));
      }
      MIXRT_RETURN_IF_ERROR(
          read(layout.body_at + offset, buffer.data(), buffer.size()));
      MIXRT_ASSIGN_OR_RETURN(ckpt.tensors[name],
                             from_bytes(buffer, shape, dtype, device));
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

}  // namespace mixrt::checkpoint_format
