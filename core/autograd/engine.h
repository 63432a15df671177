// Runs backward over the recorded graph: nodes in dependency order,
// gradients summed where a tensor fed several ops, leaves accumulated.
#ifndef MIXRT_CORE_AUTOGRAD_ENGINE_H_
#define MIXRT_CORE_AUTOGRAD_ENGINE_H_

#include <vector>

#include "absl/status/status.h"
#include "core/tensor/tensor.h"

namespace mixrt {

// `grads[i]` is d out / d roots[i]. Without retain_graph every node's saved
// tensors are released afterwards, and a second backward through them is an
// error that says so.
absl::Status RunBackward(const std::vector<Tensor>& roots,
                         const std::vector<Tensor>& grads, bool retain_graph);

}  // namespace mixrt

#endif  // MIXRT_CORE_AUTOGRAD_ENGINE_H_
