#include "backends/cpu/fusion/fusion_patterns.h"

#include <algorithm>

#include "backends/cpu/fusion/fused_attention.h"
#include "backends/cpu/fusion/fused_conv.h"
#include "backends/cpu/fusion/fused_gelu.h"
#include "backends/cpu/fusion/fused_loop.h"
#include "backends/cpu/fusion/fused_matmul.h"
#include "backends/cpu/fusion/fused_norm.h"
#include "backends/cpu/fusion/generated_loop.h"

namespace mixrt::cpu {
namespace {

// Loops number their groups from 0.
std::vector<int> ClaimLoops(const sdk::FusionGraph& graph,
                            absl::Span<const int> taken, int first) {
  std::vector<int> groups = ClaimFusedLoops(graph, taken);
  for (int& g : groups) {
    if (g >= 0) g += first;
  }
  return groups;
}

bool AnyGroup(const sdk::FusionGraph&, absl::Span<const int>, int) {
  return true;
}

constexpr MixrtOp kNoAnchor = MIXRT_OP_COUNT;

const FusionPattern kPatterns[] = {
    {"matmul with its epilogue", kMatmulEpilogues.claim, MIXRT_OP_MATMUL,
     nullptr, kMatmulEpilogues.compile},
    {"conv2d with its epilogue", kConvEpilogues.claim, MIXRT_OP_CONV2D, nullptr,
     kConvEpilogues.compile},
    {"layer_norm writing its cast", ClaimNormCasts, MIXRT_OP_LAYER_NORM,
     nullptr, CompileNormCast},
    {"layer_norm_backward with its neighbours", ClaimNormBackwards,
     MIXRT_OP_LAYER_NORM_BACKWARD, nullptr, CompileNormBackward},
    {"attention reading its heads in place", ClaimAttentionHeads,
     MIXRT_OP_SCALED_DOT_PRODUCT_ATTENTION, nullptr, CompileAttentionHeads},
    {"GELU with its gradient", ClaimGeluWithGrad, kNoAnchor, IsGeluWithGrad,
     CompileGeluWithGrad},
    {"pointwise loop", ClaimLoops, kNoAnchor, AnyGroup, CompileGeneratedLoop},
};

}  // namespace

std::vector<int> ClaimFusionPatterns(const sdk::FusionGraph& graph) {
  std::vector<int> groups(graph.nodes.size(), -1);
  for (const FusionPattern& pattern : kPatterns) {
    const int first = groups.empty()
                          ? 0
                          : 1 + *std::max_element(groups.begin(), groups.end());
    const std::vector<int> claimed = pattern.claim(graph, groups, first);
    for (size_t i = 0; i < groups.size() && i < claimed.size(); ++i) {
      if (claimed[i] >= 0) groups[i] = claimed[i];
    }
  }
  return groups;
}

const FusionPattern* PatternOwning(const sdk::FusionGraph& graph,
                                   absl::Span<const int> group_of_node,
                                   int group) {
  bool any = false;
  for (size_t i = 0; i < group_of_node.size(); ++i) {
    if (group_of_node[i] != group) continue;
    any = true;
    for (const FusionPattern& pattern : kPatterns) {
      if (pattern.anchor != kNoAnchor && graph.nodes[i].op == pattern.anchor) {
        return &pattern;
      }
    }
  }
  if (!any) return nullptr;
  for (const FusionPattern& pattern : kPatterns) {
    if (pattern.anchor == kNoAnchor &&
        pattern.owns(graph, group_of_node, group)) {
      return &pattern;
    }
  }
  return nullptr;
}

}  // namespace mixrt::cpu
