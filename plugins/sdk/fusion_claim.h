// The claim rule of loop fusion, for plugins that run a group as one loop
// over a shared iteration shape (the CPU plugin's fused loops, generated
// GPU kernels): which nodes may join which group so that every group runs
// in one place of the order (the host splits one that would not, where a
// path runs through launches it did not offer).
#ifndef MIXRT_PLUGINS_SDK_FUSION_CLAIM_H_
#define MIXRT_PLUGINS_SDK_FUSION_CLAIM_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

#include "plugins/sdk/fusion.h"

namespace mixrt::sdk {

struct LoopRules {
  // The shape a node iterates over (a reduction's: its input's), or empty
  // for a node the plugin does not run in a loop.
  std::function<std::vector<int64_t>(const FusionNode&)> iteration_shape;
  // Reductions (MIXRT_OP_REDUCE) one loop may end in.
  size_t max_reductions = 4;
};

// Per node, its group (0, 1, ... in order, each of two nodes or more) or
// -1. A node joins the group of the producer of one of its inputs (not a
// view, not a reduction's result) when both iterate over one shape and a
// reduction's axes match the group's; it does not when it reads, through
// nodes outside the group, something that depends on the group, or reads
// a group that runs after the group.
std::vector<int> ClaimLoops(const FusionGraph& graph, const LoopRules& rules);

}  // namespace mixrt::sdk

#endif  // MIXRT_PLUGINS_SDK_FUSION_CLAIM_H_
