// max-autotune's choice between a fused kernel and the launches it
// replaces: both run on the real shapes (the graph's constants, zeroed
// scratch memory for everything else) a few times, alternating, and the
// median of each decides. A fused kernel that loses by more than the
// timing's noise is refused, so a plan never runs a fusion measurably
// slower than its eager kernels; one that ties and keeps intermediates out
// of memory is kept for the memory.
#ifndef MIXRT_CORE_COMPILER_FUSION_TIMING_H_
#define MIXRT_CORE_COMPILER_FUSION_TIMING_H_

#include <cstdint>
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

// How far apart the medians of one group's fused kernel and launches
// wander between compiles on these machines: a transformer block's
// matmul-with-binary_mul group measured 0.974, 0.995, 1.007 and 0.984
// times its launches in four compiles.
inline constexpr double kFusionTimingNoise = 0.03;

// Whether max-autotune keeps a fused group of `launches` timed at `t`:
// when it beats them, or ties with them (slower by at most
// kFusionTimingNoise) while `bytes_not_stored` intermediates of theirs stay
// out of memory, which lowers the peak (the launches would allocate them)
// and the traffic. `note` is Explain()'s: the timing when kept, the reason
// when refused. `source` ends the timing's parentheses (", timed by an
// earlier compile").
struct FusionVerdict {
  bool keep = false;
  std::string note;
};
FusionVerdict JudgeFusedGroup(const FusionTiming& t, int launches,
                              int64_t bytes_not_stored,
                              const std::string& source = "");

absl::StatusOr<FusionTiming> TimeFusedGroup(
    const Graph& g, const std::vector<int>& nodes,
    const PluginFusedKernel& kernel, const std::vector<ValueRef>& value_refs,
    const std::vector<int>& values);

}  // namespace mixrt::compiler

#endif  // MIXRT_CORE_COMPILER_FUSION_TIMING_H_
