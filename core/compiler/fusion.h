// Fusion supplied by the backend (ABI 1.1): a graph's launches are offered
// to its plugin as a fusion subgraph; each group the plugin claims and
// compiles replaces its launches by one node, placed where all its inputs
// are ready. The plugin decides what fuses and how (a fused loop, an
// epilogue, generated code); what it leaves runs op by op.
#ifndef MIXRT_CORE_COMPILER_FUSION_H_
#define MIXRT_CORE_COMPILER_FUSION_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/compiler/graph.h"

namespace mixrt::compiler {

struct FusionOutcome {
  int offered = 0;   // Launches offered.
  int groups = 0;    // Fused nodes the graph now has.
  int launches = 0;  // Launches they replaced.
  // What each fused node runs, in words (the plugin's description).
  std::vector<std::string> kernels;
  // Groups the plugin claimed that run op by op after all, and why.
  std::vector<std::string> refused;
  // Why nothing was offered ("" when something was).
  std::string not_offered;
};

// `g` with its fused groups in place goes to `fused` when the outcome has
// groups; otherwise `fused` is untouched (a backend without fusion, a 1.0
// plugin, or one that claims nothing). Nothing the plugin does fails the
// call: a failed claim leaves the graph op by op (outcome.not_offered
// says why), group numbers are renumbered densely, a group that cannot
// run in one place of the order is split into pieces that can, and a group
// whose compile fails, or that disagrees with its launches when checked
// (fusion_check.h), is refused. With
// `time_groups` (max-autotune), each compiled group is timed against its
// launches on the real shapes and refused when it is not faster.
absl::StatusOr<FusionOutcome> FuseWithBackend(const Graph& g, Graph* fused,
                                              bool time_groups = false);

}  // namespace mixrt::compiler

#endif  // MIXRT_CORE_COMPILER_FUSION_H_
