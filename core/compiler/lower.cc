#include "core/compiler/lower.h"

#include <utility>

#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "core/compiler/eval_batch_norm.h"
#include "core/compiler/passes.h"
#include "core/compiler/training_passes.h"
#include "core/plugin/backend.h"
#include "mixrt/status_macros.h"

namespace mixrt::compiler {

std::string PassCounts::Summary() const {
  auto note = [](int count, absl::string_view what) {
    return count > 0 ? absl::StrCat(" (", count, " ", what, ")") : "";
  };
  return absl::StrCat(
      note(repeated, "repeated launches merged"),
      note(dead, "unused launches dropped"),
      note(relus_fused, "relus fused into matmuls"),
      note(batch_norms, "eval batch_norms as a scale and shift"),
      note(gelu_slopes, "GELUs save their derivative"),
      note(reused, "backward launches read forward results"),
      note(placed, "copies written in place by their producers"));
}

// The passes every traced graph goes through (its backward too), as a
// trace and verify's second trace must run them alike.
PassCounts RunPasses(CaptureOutcome* outcome) {
  PassCounts counts;
  Graph& forward = *outcome->graph;
  Graph* backward = outcome->training ? &outcome->training->backward : nullptr;
  counts.repeated = EliminateCommonLaunches(&forward);
  counts.dead = EliminateDeadLaunches(&forward);
  if (backward != nullptr) {
    EliminateCommonLaunches(backward);
    EliminateDeadLaunches(backward);
  }
  const Device device = forward.device;
  // Only where a backend fuses: op by op the lowered chain would be four
  // passes over the activations instead of one, and the GELU's derivative
  // a pass of its own.
  const bool fusing =
      device.valid() && device.backend()->has_fusion() && Plan::FusionEnabled();
  counts.gelu_slopes = SaveGeluDerivatives(&forward, backward, fusing);
  if (backward == nullptr && fusing) {
    counts.batch_norms = LowerEvalBatchNorms(&forward);
    if (counts.batch_norms > 0) EliminateDeadLaunches(&forward);
  }
  counts.relus_fused =
      FuseMatmulRelu(&forward, backward, [&](const GraphNode& matmul) {
        return device.backend()->RunsOp(
            device.index(), {MIXRT_OP_MATMUL, MIXRT_ACTIVATION_RELU,
                             matmul.inputs[0].dtype, matmul.outputs[0].dtype});
      });
  if (backward != nullptr) {
    counts.reused = ReuseForwardResults(&forward, backward);
    EliminateDeadLaunches(backward);
  }
  counts.placed = PlaceCopiedResults(&forward);
  if (backward != nullptr) counts.placed += PlaceCopiedResults(backward);
  return counts;
}

absl::StatusOr<LoweredPlans> LowerToPlans(Graph forward, Graph* backward,
                                          absl::string_view mode) {
  // "max-autotune" replays as "reduce-overhead" does (torch.compile's
  // max-autotune uses CUDA graphs; "max-autotune-no-cudagraphs" not), and
  // both max-autotunes keep a fused kernel only where it beat its launches.
  Plan::BuildOptions build;
  build.preallocate = mode == "reduce-overhead" || mode == "max-autotune";
  build.time_fusion = absl::StartsWith(mode, "max-autotune");
  build.fuse = true;
  // The forward and its backward share held memory (never running at
  // once: they take turns under its lock).
  build.held = std::make_shared<HeldBuffers>();
  LoweredPlans plans;
  MIXRT_ASSIGN_OR_RETURN(plans.forward, Plan::Build(std::move(forward), build));
  if (backward != nullptr) {
    MIXRT_ASSIGN_OR_RETURN(plans.backward,
                           Plan::Build(std::move(*backward), build));
  }
  return plans;
}

}  // namespace mixrt::compiler
