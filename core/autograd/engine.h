// Runs backward over the recorded graph: nodes in dependency order,
// gradients summed where a tensor fed several ops, leaves accumulated.
#ifndef MIXRT_CORE_AUTOGRAD_ENGINE_H_
#define MIXRT_CORE_AUTOGRAD_ENGINE_H_

#include <functional>
#include <vector>

#include "absl/status/status.h"
#include "core/tensor/tensor.h"

namespace mixrt {

// `grads[i]` is d out / d roots[i]. Without retain_graph every node's saved
// tensors are released afterwards, and a second backward through them is an
// error that says so.
absl::Status RunBackward(const std::vector<Tensor>& roots,
                         const std::vector<Tensor>& grads, bool retain_graph);

// PyTorch's Variable._execution_engine.queue_callback: runs `callback` once
// the backward that is running on this thread has finished every node
// (DistributedDataParallel waits for its last all-reduces there). An error
// fails that backward. Outside a backward it is FailedPrecondition.
absl::Status QueueBackwardCallback(std::function<absl::Status()> callback);

// The same, but on the outermost backward running on this thread: a
// backward that a node runs inside another (activation checkpointing
// recomputes its region and backpropagates through it on its own) ends
// before the user's backward has produced every gradient. What must wait
// for all of them (DistributedDataParallel's last all-reduces) queues here.
absl::Status QueueOutermostBackwardCallback(
    std::function<absl::Status()> callback);

}  // namespace mixrt

#endif  // MIXRT_CORE_AUTOGRAD_ENGINE_H_
