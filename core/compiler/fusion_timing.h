// max-autotune's choice between a fused kernel and the launches it
// replaces: both run on the real shapes (the graph's constants, zeroed
// scratch memory for everything else) a few times, alternating, and the
// median of each decides. A fused kernel that loses is refused, so a plan
// never runs a fusion slower than its eager kernels.
#ifndef MIXRT_CORE_COMPILER_FUSION_TIMING_H_
#define MIXRT_CORE_COMPILER_FUSION_TIMING_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/compiler/graph.h"
#include "core/plugin/backend.h"

namespace mixrt::compiler {

struct FusionTiming {
  double fused_us = 0;
  double launches_us = 0;
};

// `nodes` (launches of `g`) one by one against `kernel` run with one
// address per fusion value: `value_refs[v]` is value v's place in `g`,
// `values` the ones the kernel's run gets an address for.
// The compile cache's key for timing `kernel` (its description) against
// `nodes` of `g` on `g`'s device, and the payload it is stored as; the
// decision persists with the other artifacts, so a second process reuses
// it without timing again.
std::string FusionTimingKey(const Graph& g, const std::vector<int>& nodes,
                            const std::string& kernel);
std::string FormatFusionTiming(const FusionTiming& t);
std::optional<FusionTiming> ParseFusionTiming(const std::string& payload);

absl::StatusOr<FusionTiming> TimeFusedGroup(const Graph& g, const std::vector<int>& nodes,
                                            const PluginFusedKernel& kernel,
                                            const std::vector<ValueRef>& value_refs,
                                            const std::vector<int>& values);

}  // namespace mixrt::compiler

#endif  // MIXRT_CORE_COMPILER_FUSION_TIMING_H_
