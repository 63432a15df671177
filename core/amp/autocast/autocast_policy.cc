#include "core/amp/autocast/autocast_policy.h"

namespace mixrt {

AutocastPolicyEntry AutocastPolicyFor(absl::string_view device_type,
                                      absl::string_view op) {
  const absl::Span<const AutocastPolicyEntry> table =
      device_type == "cuda" ? CudaAutocastPolicy() : CpuAutocastPolicy();
  for (const AutocastPolicyEntry& e : table) {
    if (e.op == op) return e;
  }
  return {op, AutocastCategory::kUnlisted, ""};
}

}  // namespace mixrt
