// One description of a fused loop, built once per claimed group: the
// iteration shape, its split at the reduced dims, the values it loads (with
// their strides), the element steps in order, the values it stores and the
// reductions it ends in. The CPU plugin's interpreter runs it and the loop
// emitter (loop_codegen.h) prints it, so the two cannot disagree about what
// a group computes; the element math both use is loop_elements.h, the
// reduction order reduction_order.h.
//
// LoopIterationShape is the single "can a loop run this node" rule that
// claims use, and BuildLoopProgram refuses with UNIMPLEMENTED, naming what
// it cannot express, anything else. A new fusable op is one LoopStepKind,
// one case in StepKindOf, one in the interpreter and one emitter line.
#ifndef MIXRT_PLUGINS_SDK_LOOP_PROGRAM_H_
#define MIXRT_PLUGINS_SDK_LOOP_PROGRAM_H_

#include <cstdint>
#include <string>
#include <vector>

#include "mixrt/plugin_api.h"
#include "plugins/sdk/fusion.h"
#include "plugins/sdk/span.h"
#include "plugins/sdk/status.h"

namespace mixrt::sdk {

// What one step computes, each an element function of loop_elements.h.
enum class LoopStepKind {
  // (x, y).
  kAdd,
  kSub,
  kMul,
  kDiv,
  kPow,
  kMaximum,
  kMinimum,
  // (x), with alpha (leaky_relu's slope, clamp's low) and beta (clamp's
  // high).
  kNeg,
  kAbs,
  kRelu,
  kLeakyRelu,
  kGelu,
  kClamp,
  // (grad, x): grad times the derivative at x.
  kNegBackward,
  kAbsBackward,
  kReluBackward,
  kLeakyReluBackward,
  kGeluBackward,
  kClampBackward,
  // (x, y) -> bool.
  kEq,
  kNe,
  kLt,
  kLe,
  kGt,
  kGe,
  // (condition, x, y).
  kWhere,
  // (x) to the step's dtype: a float dtype or bool from a float; from an
  // integer, any of those or an integer.
  kCopy,
};

// Loops carry every value in a "local": a chunk of floats (bool as 0 or 1,
// bf16 and f16 rounded to their dtype), or of int64 for integer values.
struct LoopLoad {
  int value;  // Fusion value the run gives data for.
  int local;
  MixrtDtype dtype;
  std::vector<int64_t> strides;  // Over the iteration shape.
  bool contiguous;
  bool integer;
};

struct LoopStep {
  LoopStepKind kind;
  float alpha = 0, beta = 0;
  std::vector<int> in;  // Locals.
  int out = -1;
  MixrtDtype out_dtype;
  bool int_inputs = false;  // A compare or copy of integer locals.
  bool int_out = false;     // An integer copy.
};

struct LoopStore {
  int value;
  int local;
  MixrtDtype dtype;
};

struct LoopReduction {
  int local;  // The values it reduces.
  int value;  // Its result.
  MixrtReduceKind kind;
  MixrtDtype dtype;
};

struct LoopProgram {
  std::vector<int64_t> shape;
  int64_t numel = 1;
  // With reductions: the shape as [outer, middle (reduced), inner].
  ReducedSplit split;
  int locals = 0;
  std::vector<bool> local_is_int;
  std::vector<LoopLoad> loads;
  std::vector<LoopStep> steps;
  std::vector<LoopStore> stores;
  std::vector<LoopReduction> reductions;
  // The ops of the group in order, for descriptions.
  std::vector<std::string> op_names;
};

// The shape node `n` iterates over in a loop (a reduction's: its input's),
// or empty when a loop cannot run it: static values, contiguous results,
// an op of a kind with a step, a reduction over one run of dims kept as 1.
std::vector<int64_t> LoopIterationShape(const FusionGraph& graph,
                                        const FusionNode& n);

// The step kind of a pointwise node, or UNIMPLEMENTED naming op and kind.
StatusOr<LoopStepKind> StepKindOf(const FusionNode& n);

// The program of group `group`; UNIMPLEMENTED for what a loop cannot
// express (a node LoopIterationShape refuses, reductions over different
// dims, an integer result stored), INVALID_ARGUMENT for an empty group.
StatusOr<LoopProgram> BuildLoopProgram(const FusionGraph& graph,
                                       Span<const int> group_of_node,
                                       int group);

// Whether a reduction's result is taken as a sum (sum and mean do).
inline bool ReductionSums(MixrtReduceKind k) {
  return k == MIXRT_REDUCE_SUM || k == MIXRT_REDUCE_MEAN;
}

}  // namespace mixrt::sdk

#endif  // MIXRT_PLUGINS_SDK_LOOP_PROGRAM_H_
