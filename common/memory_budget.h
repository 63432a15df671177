// Whether a host buffer of a given size can exist on this machine at all,
// checked before allocating: an allocation larger than physical memory and
// swap fails (or, under a sanitizer, aborts) instead of throwing bad_alloc
// reliably, and must be reported as running out of memory, never as a
// damaged file.
#ifndef MIXRT_COMMON_MEMORY_BUDGET_H_
#define MIXRT_COMMON_MEMORY_BUDGET_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace mixrt::files {

// ResourceExhausted "out of memory: <what> needs N bytes; this machine has
// M bytes of memory and swap" when `bytes` exceeds physical memory + swap.
absl::Status CheckFitsInMemory(uint64_t bytes, absl::string_view what);

}  // namespace mixrt::files

#endif  // MIXRT_COMMON_MEMORY_BUDGET_H_
