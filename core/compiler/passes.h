// Graph passes run before a graph becomes a plan.
#ifndef MIXRT_CORE_COMPILER_PASSES_H_
#define MIXRT_CORE_COMPILER_PASSES_H_

#include "core/compiler/graph.h"

namespace mixrt::compiler {

// Drops launches whose results nothing uses: a launch is kept when it
// writes memory that outlives the call (an input, a constant: in-place
// updates are effects), a result, an activation the backward reads, or
// memory a kept launch or a host read reads. Per slot, not per byte: any writer
// of a live slot is kept. Returns how many launches went.
int EliminateDeadLaunches(Graph* graph);

// Common subexpressions: a launch that repeats an earlier one (same op,
// attributes and input views, the inputs unwritten in between) is dropped
// and its results read from the earlier launch's. Only launches whose
// results are whole temporaries written once (not results of the call,
// not saved for backward) go, into launches whose results are written
// once. Returns how many launches went.
int EliminateCommonLaunches(Graph* graph);

// A launch whose result only a same-dtype copy reads, the copy writing it
// densely into part of a temporary (autograd stacking a split's gradients,
// a cat), writes that part itself and the copy goes, as Inductor's concat
// buffers have their inputs' producers write into them. The producer must
// write the whole temporary no one else reads, nothing may touch the
// destination between the two, and the producer must not read it. Returns
// how many copies went.
int PlaceCopiedResults(Graph* graph);

}  // namespace mixrt::compiler

#endif  // MIXRT_CORE_COMPILER_PASSES_H_
