// Autocast's per-op precision policy, one table per device type, as data
// (autocast_policy_cpu.cc, autocast_policy_cuda.cc), following PyTorch's
// lists in aten/src/ATen/autocast_mode.cpp so they stay diffable.
#ifndef MIXRT_CORE_AMP_AUTOCAST_AUTOCAST_POLICY_H_
#define MIXRT_CORE_AMP_AUTOCAST_AUTOCAST_POLICY_H_

#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace mixrt {

enum class AutocastCategory {
  kLowerPrecision,  // Runs in the autocast dtype (f16/bf16).
  kFloat32,         // Runs in f32 (numerically sensitive).
  kPromote,         // Runs in the widest input dtype.
  kRefused,         // An error under autocast (see the table's reason).
  kUnlisted,        // Runs in whatever dtypes it is given.
};

struct AutocastPolicyEntry {
  absl::string_view op;
  AutocastCategory category;
  absl::string_view note;  // For kRefused: what to do instead.
};

absl::Span<const AutocastPolicyEntry> CpuAutocastPolicy();
absl::Span<const AutocastPolicyEntry> CudaAutocastPolicy();

// The entry for `op` under `device_type` ("cpu" or "cuda"; others use the
// CPU table), or a kUnlisted entry.
AutocastPolicyEntry AutocastPolicyFor(absl::string_view device_type,
                                      absl::string_view op);

}  // namespace mixrt

#endif  // MIXRT_CORE_AMP_AUTOCAST_AUTOCAST_POLICY_H_
