#include "core/plugin/isolation/arena_size.h"

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace mixrt::isolation {
namespace {

constexpr uint64_t kMiB = uint64_t{1} << 20;

uint64_t MappedBytes() {
  FILE* f = std::fopen("/proc/self/statm", "re");
  if (f == nullptr) return 0;
  unsigned long long pages = 0;
  const int read = std::fscanf(f, "%llu", &pages);
  std::fclose(f);
  return read == 1 ? pages * static_cast<uint64_t>(sysconf(_SC_PAGESIZE)) : 0;
}

}  // namespace

AddressSpace CurrentAddressSpace() {
  AddressSpace space;
  space.physical_bytes = static_cast<uint64_t>(sysconf(_SC_PHYS_PAGES)) *
                         static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
  struct rlimit limit;
  if (getrlimit(RLIMIT_AS, &limit) == 0 && limit.rlim_cur != RLIM_INFINITY) {
    space.limit_bytes = limit.rlim_cur;
  }
  space.in_use_bytes = MappedBytes();
  return space;
}

std::string DescribeAddressLimit(const AddressSpace& space) {
  if (!space.limit_bytes.has_value()) return "";
  return absl::StrCat("the address-space limit (RLIMIT_AS, ulimit -v) of ",
                      *space.limit_bytes, " bytes, ", space.in_use_bytes,
                      " in use");
}

absl::StatusOr<uint64_t> ChooseArenaBytes(uint64_t requested,
                                          const AddressSpace& space) {
  const uint64_t room = !space.limit_bytes.has_value() ? UINT64_MAX
                        : *space.limit_bytes > space.in_use_bytes
                            ? *space.limit_bytes - space.in_use_bytes
                            : 0;
  const char* how =
      "; set MIXRT_PLUGIN_ARENA_BYTES (or load_plugin's arena_bytes) to a "
      "size that fits, raise the limit, or load the plugin in process";
  if (requested != 0) {
    if (requested > room) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "the out-of-process plugin's shared arena of ", requested,
          " bytes does not fit ", DescribeAddressLimit(space), how));
    }
    return requested;
  }
  uint64_t bytes = std::min(space.physical_bytes, room / 2) / kMiB * kMiB;
  if (bytes < kMinArenaBytes) {
    return absl::ResourceExhaustedError(
        absl::StrCat(DescribeAddressLimit(space),
                     " leaves no room for the out-of-process "
                     "plugin's shared arena (at least ",
                     kMinArenaBytes,
                     " bytes, and as "
                     "much again for the plugin's process)",
                     how));
  }
  return bytes;
}

std::optional<uint64_t> ParseByteSize(absl::string_view text) {
  text = absl::StripAsciiWhitespace(text);
  if (text.empty()) return std::nullopt;
  int shift = 0;
  switch (absl::ascii_toupper(text.back())) {
    case 'K':
      shift = 10;
      break;
    case 'M':
      shift = 20;
      break;
    case 'G':
      shift = 30;
      break;
    case 'T':
      shift = 40;
      break;
    default:
      break;
  }
  if (shift != 0) text.remove_suffix(1);
  uint64_t value = 0;
  if (!absl::SimpleAtoi(text, &value) || value == 0 ||
      value > (UINT64_MAX >> shift)) {
    return std::nullopt;
  }
  return value << shift;
}

}  // namespace mixrt::isolation
