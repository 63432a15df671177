// The checkpoint file format, read through random access so a file is
// streamed (its CRC computed in chunks, each tensor read on its own) rather
// than held in memory whole:
//
//   "MIXRTCK1" | u64 header length | JSON header (version; entries with
//   name, dtype, shape, offset, bytes; scalars; integers) | tensor bytes |
//   u32 CRC-32 of everything before it | "MIXRTEND"
//
// Internal to core/io; users call checkpoint.h.
#ifndef MIXRT_CORE_IO_CHECKPOINT_FORMAT_H_
#define MIXRT_CORE_IO_CHECKPOINT_FORMAT_H_

#include <cstdint>
#include <functional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/io/checkpoint.h"
#include "nlohmann/json.hpp"

namespace mixrt::checkpoint_format {

// Reads exactly `n` bytes at `offset` of the checkpoint's bytes.
using ReadAtFn =
    std::function<absl::Status(uint64_t offset, void* out, size_t n)>;

// Where the parts of a checkpoint are, once its framing, CRC and header
// are verified.
struct Layout {
  nlohmann::json header;
  uint64_t body_at = 0;
  uint64_t body_size = 0;
};

// The whole file, ready to write; InvalidArgument for a non-finite scalar
// or a name that is not UTF-8.
absl::StatusOr<std::string> Serialize(const Checkpoint& ckpt);

// Checks magic, end marker, CRC (streamed) and header of `size` bytes.
absl::StatusOr<Layout> ReadLayout(uint64_t size, const ReadAtFn& read,
                                  absl::string_view path);

// Every entry, scalar and integer, validated; tensors on `device`.
absl::StatusOr<Checkpoint> ReadContents(const Layout& layout,
                                        const ReadAtFn& read,
                                        absl::string_view path,
                                        const Device& device);

}  // namespace mixrt::checkpoint_format

#endif  // MIXRT_CORE_IO_CHECKPOINT_FORMAT_H_
