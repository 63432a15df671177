// The compiler's stages after capture (capture.h), in the order they run:
//
//   1. RunPasses: graph passes over a trace and its backward (passes.h,
//      training_passes.h, eval_batch_norm.h): CSE, dead launches, GELU
//      slopes, eval batch_norms, matmul + relu, backward reuse of forward
//      results, copies written in place.
//   2. LowerToPlans: backend fusion (fusion.h; timed in max-autotune) and
//      the plans that replay the graphs (plan.h), the forward and its
//      backward sharing held memory in the modes that hold it.
//
// A trace goes through both (CompiledFunction's Trace); a verify's second
// trace through the first only (its graphs are compared before fusion);
// graphs another module instance traced through the second only (they
// were passed when traced).
#ifndef MIXRT_CORE_COMPILER_LOWER_H_
#define MIXRT_CORE_COMPILER_LOWER_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/compiler/capture.h"
#include "core/compiler/graph.h"
#include "core/compiler/plan.h"

namespace mixrt::compiler {

// What the passes did to a traced graph, for the compile log.
struct PassCounts {
  int repeated = 0;     // Launches CSE merged in the forward.
  int dead = 0;         // Unused launches dropped from the forward.
  int relus_fused = 0;  // Relus that became matmul epilogues.
  int batch_norms = 0;  // Eval batch_norms lowered to a scale and shift.
  int gelu_slopes = 0;  // GELUs saving their derivative for the backward.
  int reused = 0;       // Backward launches reading forward results.
  int placed = 0;       // Copies whose producers now write their places.

  // " (3 repeated launches merged) (1 unused launches dropped)...".
  std::string Summary() const;
};

// Stage 1, on the graphs of `outcome` (its backward too).
PassCounts RunPasses(CaptureOutcome* outcome);

struct LoweredPlans {
  std::shared_ptr<Plan> forward;
  std::shared_ptr<Plan> backward;  // Null without a backward graph.
};

// Stage 2: `forward` and, when not null, `backward` (moved from) fused and
// planned for compile mode `mode` ("default", "reduce-overhead",
// "max-autotune", "max-autotune-no-cudagraphs").
absl::StatusOr<LoweredPlans> LowerToPlans(Graph forward, Graph* backward,
                                          absl::string_view mode);

}  // namespace mixrt::compiler

#endif  // MIXRT_CORE_COMPILER_LOWER_H_
