// The partial plugin's fusion (ABI 1.1), as small as a real one gets: it
// claims chains of f32 add, mul and relu — optionally after a matmul, as
// its epilogue — and runs each chain in one pass over the elements, every
// intermediate in a register instead of memory. See plugins/README.md,
// "Fusion: a walk-through".
#ifndef MIXRT_EXAMPLES_OUT_OF_TREE_PLUGIN_CHAIN_FUSION_H_
#define MIXRT_EXAMPLES_OUT_OF_TREE_PLUGIN_CHAIN_FUSION_H_

#include <memory>
#include <vector>

#include "mixrt/sdk/fusion.h"
#include "mixrt/sdk/span.h"
#include "mixrt/sdk/status.h"

namespace partial {

// Per node of `graph`, its group (0, 1, ... without gaps) or -1.
std::vector<int> ClaimChains(const mixrt::sdk::FusionGraph& graph);

// The kernel running group `group` of a claim.
mixrt::sdk::StatusOr<std::unique_ptr<mixrt::sdk::FusedKernel>> CompileChain(
    const mixrt::sdk::FusionGraph& graph,
    mixrt::sdk::Span<const int> group_of_node, int group);

}  // namespace partial

#endif  // MIXRT_EXAMPLES_OUT_OF_TREE_PLUGIN_CHAIN_FUSION_H_
