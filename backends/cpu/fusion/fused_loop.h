// The CPU plugin's fusion (ABI 1.1) without a code generator: the
// interpreter of sdk::LoopProgram (chains of pointwise ops ending
// optionally in sums, means, maxima or minima over a run of axes), run as
// one loop over memory in chunks of a few hundred elements that stay in
// L1: each step runs over the chunk with the element functions (and GELU
// row kernels) the op-by-op kernels use, so a fused result is the op-by-op
// result bit for bit (reductions in sdk/reduction_order.h's order).
// Intermediates only the chain reads never reach memory.
#ifndef MIXRT_BACKENDS_CPU_FUSION_FUSED_LOOP_H_
#define MIXRT_BACKENDS_CPU_FUSION_FUSED_LOOP_H_

#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "plugins/sdk/fusion.h"
#include "plugins/sdk/loop_program.h"

namespace mixrt::cpu {

// Per node of `graph`, its fused loop (0, 1, ...), or -1; nodes whose
// `taken` entry is not -1 (another fusion's) are left out.
std::vector<int> ClaimFusedLoops(const sdk::FusionGraph& graph,
                                 absl::Span<const int> taken = {});

// The interpreter of `program`.
std::unique_ptr<sdk::FusedKernel> MakeFusedLoop(sdk::LoopProgram program);

// MakeFusedLoop of group `group`'s program (sdk::BuildLoopProgram's errors).
absl::StatusOr<std::unique_ptr<sdk::FusedKernel>> CompileFusedLoop(
    const sdk::FusionGraph& graph, absl::Span<const int> group_of_node,
    int group);

}  // namespace mixrt::cpu

#endif  // MIXRT_BACKENDS_CPU_FUSION_FUSED_LOOP_H_
