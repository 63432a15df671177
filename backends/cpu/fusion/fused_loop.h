// The CPU plugin's fusion (ABI 1.1) without a code generator: chains of
// pointwise ops (binary, unary and its backward, compare, where, casts),
// ending optionally in sums, means, maxima or minima over a run of axes,
// run as one loop over memory in chunks of a few hundred elements that
// stay in L1: each op of the chain runs over the chunk with the same row
// functions the op-by-op kernels use, so a fused result is the op-by-op
// result bit for bit (reductions accumulate in double in the order the
// reduce kernel does). Intermediates only the chain reads never reach
// memory.
#ifndef MIXRT_BACKENDS_CPU_FUSION_FUSED_LOOP_H_
#define MIXRT_BACKENDS_CPU_FUSION_FUSED_LOOP_H_

#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "plugins/sdk/fusion.h"

namespace mixrt::cpu {

// Per node of `graph`, its fused loop (0, 1, ...), or -1; nodes whose
// `taken` entry is not -1 (another fusion's) are left out.
std::vector<int> ClaimFusedLoops(const sdk::FusionGraph& graph,
                                 absl::Span<const int> taken = {});

absl::StatusOr<std::unique_ptr<sdk::FusedKernel>> CompileFusedLoop(
    const sdk::FusionGraph& graph, absl::Span<const int> group_of_node,
    int group);

}  // namespace mixrt::cpu

#endif  // MIXRT_BACKENDS_CPU_FUSION_FUSED_LOOP_H_
