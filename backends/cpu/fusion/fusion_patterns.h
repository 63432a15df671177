// The CPU plugin's fusion patterns in one table (as oneDNN Graph's pattern
// registry): each row claims its groups over the nodes the rows before it
// left, and compiles the groups it owns. The table's order is the claim
// priority: GEMMs and convolutions with the chains they feed first (oneDNN
// primitives with post-ops), then layer_norms writing their casts and
// layer_norm_backwards with their neighbours, attentions reading their
// heads in place and GELUs with their gradients, then loops over what is
// left. A new pattern is one row (docs/contributing.md).
#ifndef MIXRT_BACKENDS_CPU_FUSION_FUSION_PATTERNS_H_
#define MIXRT_BACKENDS_CPU_FUSION_FUSION_PATTERNS_H_

#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "mixrt/plugin_api.h"
#include "plugins/sdk/fusion.h"

namespace mixrt::cpu {

struct FusionPattern {
  const char* name;
  // Per node, its group (numbered from `first` up) or -1; a node whose
  // `taken` entry is not -1 is another row's and is never claimed.
  std::vector<int> (*claim)(const sdk::FusionGraph& graph,
                            absl::Span<const int> taken, int first);
  // The op whose node marks this row's groups: the first node of a group
  // that is any row's anchor decides. MIXRT_OP_COUNT for rows that `owns`
  // decides instead, asked in table order when no anchor decided.
  MixrtOp anchor;
  bool (*owns)(const sdk::FusionGraph& graph,
               absl::Span<const int> group_of_node, int group);
  absl::StatusOr<std::unique_ptr<sdk::FusedKernel>> (*compile)(
      const sdk::FusionGraph& graph, absl::Span<const int> group_of_node,
      int group);
};

// Per node of `graph`, its group or -1: every row's claims, each row's
// groups numbered after the last row's.
std::vector<int> ClaimFusionPatterns(const sdk::FusionGraph& graph);

// The row that compiles `group`, or null when no node is in it.
const FusionPattern* PatternOwning(const sdk::FusionGraph& graph,
                                   absl::Span<const int> group_of_node,
                                   int group);

}  // namespace mixrt::cpu

#endif  // MIXRT_BACKENDS_CPU_FUSION_FUSION_PATTERNS_H_
