#include "common/memory_budget.h"

#include <sys/sysinfo.h>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace mixrt::files {

absl::Status CheckFitsInMemory(uint64_t bytes, absl::string_view what) {
  struct sysinfo info;
  if (::sysinfo(&info) != 0) return absl::OkStatus();  // Unknown: try it.
  const uint64_t total =
      (static_cast<uint64_t>(info.totalram) + info.totalswap) * info.mem_unit;
  if (bytes > total) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "out of memory: ", what, " needs ", bytes, " bytes; this machine has ",
        total, " bytes of memory and swap"));
  }
  return absl::OkStatus();
}

}  // namespace mixrt::files
