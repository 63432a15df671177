// Tracing: one eager call of a function, run for real (its results are the
// call's results), with every launch, allocation and host write recorded
// into a Graph, and, when results need gradients, its backward into a
// second graph (AOTAutograd's joint capture, split where the backward reads
// what the forward saved). What a replay could not reproduce ends the
// capture with a reason instead of a graph: a host read of tensor data
// (the code after it may depend on the values; under fullgraph a guard on
// the value instead), random numbers drawn before the call, launches on
// two devices, an attribute extension the IR cannot copy.
#ifndef MIXRT_CORE_COMPILER_CAPTURE_H_
#define MIXRT_CORE_COMPILER_CAPTURE_H_

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/autograd/node.h"
#include "core/compiler/graph.h"
#include "core/tensor/capture_hooks.h"
#include "core/tensor/tensor.h"

namespace mixrt::compiler {

using TracedFunction = std::function<absl::StatusOr<std::vector<Tensor>>(
    const std::vector<Tensor>&)>;

// Where one gradient of a compiled backward goes: into the history of
// input `input` (looked up again on every call: each call's input has its
// own), or along `edge` (a parameter's accumulator, or history recorded
// before the call).
struct GradientSink {
  int input = -1;
  Edge edge;
  int parameter = -1;  // The edge is that parameter's accumulator.
};

// A call whose results need gradients is traced twice: the forward as it
// runs, then its backward, run once on ones with every gradient bound for
// a leaf or an input caught instead of accumulated (retain_graph keeps the
// eager graph for the caller's own backward of that first call).
struct TrainingGraphs {
  // Inputs: one gradient per entry of grad_outputs; results: one gradient
  // per sink that got one (sink_result[i], -1 for none).
  Graph backward;
  std::vector<int> grad_outputs;  // Forward results that take a gradient.
  std::vector<GradientSink> sinks;
  std::vector<int> sink_result;
};

struct CaptureOutcome {
  std::vector<Tensor> outputs;  // The eager call's results.
  std::optional<Graph> graph;
  std::optional<TrainingGraphs> training;  // When results need gradients.
  std::string not_captured;                // Why there is no graph.
  // What the call read besides its inputs and what a replay needs to
  // still hold: modules' training flags and other GuardedValues, and the
  // requires_grad of each leaf tensor it read that is not an input.
  std::vector<HostGuard> host_guards;
};

// The function's own error when it fails. With `parameters` (a module's),
// constants and gradient sinks that are parameters are marked with their
// index. With `host_reads_are_guards` (fullgraph), a host read of tensor
// data in the forward is a kHostRead node guarding the value read instead
// of a graph break, unless the call wrote memory that outlives it first.
absl::StatusOr<CaptureOutcome> CaptureCall(
    const TracedFunction& fn, const std::vector<Tensor>& inputs,
    const std::vector<Tensor>* parameters = nullptr,
    bool host_reads_are_guards = false);

}  // namespace mixrt::compiler

#endif  // MIXRT_CORE_COMPILER_CAPTURE_H_
