// Passes over a training call's forward and backward graphs together (the
// joint graph AOTAutograd optimizes): what one graph computes, the other
// may read instead of computing, and what the backward reads decides what
// the forward keeps. Both also run on a forward alone (inference).
#ifndef MIXRT_CORE_COMPILER_TRAINING_PASSES_H_
#define MIXRT_CORE_COMPILER_TRAINING_PASSES_H_

#include "absl/functional/function_ref.h"
#include "core/compiler/graph.h"

namespace mixrt::compiler {

// A backward launch that repeats a forward launch (same op, attributes and
// views of the same memory, none of it written since) is dropped, and its
// result read from the forward's, which the forward then saves: a mean
// cross entropy's count of counted targets, which its backward formula
// computes again, runs once per step. Launches on constants alone are left
// to each plan, which keeps their results between runs anyway. Returns
// how many backward launches went.
int ReuseForwardResults(Graph* forward, Graph* backward);

// A matmul without an activation whose result only a relu reads becomes
// one matmul with a relu epilogue (where `runs_fused` says the device runs
// that matmul with MIXRT_ACTIVATION_RELU). The backward's relu gradients,
// which read the relu's input, read its result instead: relu'(x) is
// [x > 0] = [relu(x) > 0], NaN included, so the gradients stay bit for bit
// and the pre-activation is no longer saved. `backward` may be null.
// Returns how many relus were fused.
int FuseMatmulRelu(Graph* forward, Graph* backward,
                   absl::FunctionRef<bool(const GraphNode& matmul)> runs_fused);

// A GELU whose input the backward reads only as the x of GELU gradients
// saves its derivative instead: the forward computes it beside the GELU
// (a gradient of ones at the same x, which a backend may run with the GELU
// as one pass: one erfc for both), and each backward gradient becomes a
// multiply by it, which the matmul producing the incoming gradient can take
// as an epilogue. The backward's own pass over the activations (an erfc
// and an exp per element) goes; what is saved is the same size. Only where
// `fuses_pair` (op by op the forward would take the gradient's pass
// instead). Returns how many GELUs save their derivative.
int SaveGeluDerivatives(Graph* forward, Graph* backward, bool fuses_pair);

}  // namespace mixrt::compiler

#endif  // MIXRT_CORE_COMPILER_TRAINING_PASSES_H_
