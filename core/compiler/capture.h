// Tracing: one eager call of a function, run for real (its results are the
// call's results), with every launch, allocation and host write recorded
// into a Graph. What a replay could not reproduce ends the capture with a
// reason instead of a graph: a host read of tensor data (the code after it
// may depend on the values), random draws, autograd history on a result,
// launches on two devices, an attribute extension the IR cannot copy.
#ifndef MIXRT_CORE_COMPILER_CAPTURE_H_
#define MIXRT_CORE_COMPILER_CAPTURE_H_

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/compiler/graph.h"
#include "core/tensor/tensor.h"

namespace mixrt::compiler {

using TracedFunction = std::function<absl::StatusOr<std::vector<Tensor>>(
    const std::vector<Tensor>&)>;

struct CaptureOutcome {
  std::vector<Tensor> outputs;  // The eager call's results.
  std::optional<Graph> graph;
  std::string not_captured;  // Why there is no graph.
};

// The function's own error when it fails.
absl::StatusOr<CaptureOutcome> CaptureCall(const TracedFunction& fn,
                                           const std::vector<Tensor>& inputs);

}  // namespace mixrt::compiler

#endif  // MIXRT_CORE_COMPILER_CAPTURE_H_
