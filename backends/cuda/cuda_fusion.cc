#include "backends/cuda/cuda_fusion.h"

#include "absl/status/statusor.h"
#include "backends/cuda/nvrtc_program.h"
#include "mixrt/status_macros.h"
#include "plugins/sdk/fusion_claim.h"
#include "plugins/sdk/loop_codegen.h"

namespace mixrt::cuda {

std::vector<int> ClaimGeneratedLoops(const sdk::FusionGraph& graph) {
  sdk::LoopRules rules;
  rules.iteration_shape = [&graph](const sdk::FusionNode& n) {
    return sdk::LoopCodegenShape(graph, n);
  };
  rules.max_reductions = 0;
  return sdk::ClaimLoops(graph, rules);
}

absl::StatusOr<FusedPtx> CompileGeneratedLoop(
    const sdk::FusionGraph& graph, absl::Span<const int> group_of_node,
    int group, const std::string& arch) {
  MIXRT_ASSIGN_OR_RETURN(sdk::LoopSource source,
                         sdk::GenerateLoopSource(graph, group_of_node, group));
  FusedPtx out;
  MIXRT_ASSIGN_OR_RETURN(
      out.ptx, CompileToPtx(source.source, source.name + ".cu", arch));
  out.name = source.name;
  out.values = source.values;
  out.numel = source.numel;
  return out;
}

}  // namespace mixrt::cuda
