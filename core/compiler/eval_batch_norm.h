// An inference graph's batch_norm in eval mode, whose statistics and
// affine parameters are constants of the graph, as what it computes: a
// per-channel scale and shift, y = x * scale + shift in f32 rounded once to
// y's dtype. scale = weight / sqrt(running_var + eps) and shift = bias -
// running_mean * scale are launches on constants alone, so the plan keeps
// them between runs and recomputes them when a parameter changes. The per
// element part is pointwise: a fusing backend runs it with its neighbours
// (the relu after it) as one pass, where batch_norm was a launch of its own
// that the compiler could not offer (its op writes the running statistics).
// Inductor folds eval batch norms into their convolutions for the same
// reason; the scale and shift keep the convolution's own rounding.
#ifndef MIXRT_CORE_COMPILER_EVAL_BATCH_NORM_H_
#define MIXRT_CORE_COMPILER_EVAL_BATCH_NORM_H_

#include "core/compiler/graph.h"

namespace mixrt::compiler {

// Rewrites every such batch_norm of `g` (the graph of a forward with no
// backward); returns how many.
int LowerEvalBatchNorms(Graph* g);

}  // namespace mixrt::compiler

#endif  // MIXRT_CORE_COMPILER_EVAL_BATCH_NORM_H_
