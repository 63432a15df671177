// How large the shared arena of an out-of-process plugin is
// (isolated_plugin.h). It is address space, mapped sparse in both
// processes, so by default it is as large as the machine's memory; but
// under an address-space limit (RLIMIT_AS, `ulimit -v`) a mapping that
// large fails, so the default shrinks to what the limit leaves room for.
#ifndef MIXRT_CORE_PLUGIN_ISOLATION_ARENA_SIZE_H_
#define MIXRT_CORE_PLUGIN_ISOLATION_ARENA_SIZE_H_

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace mixrt::isolation {

// Below this an arena is of no use: device copies stage through 8 MiB of
// it, and a model's tensors live in it.
inline constexpr uint64_t kMinArenaBytes = uint64_t{64} << 20;

// What bounds the arena in this process.
struct AddressSpace {
  uint64_t physical_bytes = 0;
  std::optional<uint64_t> limit_bytes;  // RLIMIT_AS; none when unlimited.
  uint64_t in_use_bytes = 0;            // This process's mappings now.
};
AddressSpace CurrentAddressSpace();

// "the address-space limit (RLIMIT_AS, ulimit -v) of N bytes, M in use",
// or "" without a limit: for errors about a mapping that did not fit.
std::string DescribeAddressLimit(const AddressSpace& space);

// The arena's size. `requested` (0: none) is taken as given unless the
// limit leaves no room for it; the default is the machine's memory, capped
// at half the room the limit leaves (the plugin host maps the arena too,
// and its own libraries and threads need the rest). Rounded down to 1 MiB.
// ResourceExhausted naming the limit when not even kMinArenaBytes fits.
absl::StatusOr<uint64_t> ChooseArenaBytes(uint64_t requested,
                                          const AddressSpace& space);

// "8589934592", "512M", "8G", "1T" (binary units) as bytes; nullopt when
// it is none of those or zero.
std::optional<uint64_t> ParseByteSize(absl::string_view text);

}  // namespace mixrt::isolation

#endif  // MIXRT_CORE_PLUGIN_ISOLATION_ARENA_SIZE_H_
