#include "core/autograd/engine.h"

#include <deque>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "core/autograd/grad_mode.h"
#include "core/autograd/node.h"
#include "core/kernels/pointwise.h"
#include "core/tensor/capture_hooks.h"
#include "mixrt/status_macros.h"

namespace mixrt {
namespace {

// The callbacks of the backwards running on this thread, innermost last (a
// hook may itself run a backward).
thread_local std::vector<std::vector<std::function<absl::Status()>>>*
    t_backward_callbacks = nullptr;

absl::Status RunBackwardNodes(const std::vector<Tensor>& roots,
                              const std::vector<Tensor>& grads,
                              bool retain_graph);

}  // namespace

absl::Status QueueBackwardCallback(std::function<absl::Status()> callback) {
  if (t_backward_callbacks == nullptr || t_backward_callbacks->empty()) {
    return absl::FailedPreconditionError(
        "QueueBackwardCallback: no backward is running on this thread");
  }
  t_backward_callbacks->back().push_back(std::move(callback));
  return absl::OkStatus();
}

absl::Status QueueOutermostBackwardCallback(
    std::function<absl::Status()> callback) {
  if (t_backward_callbacks == nullptr || t_backward_callbacks->empty()) {
    return absl::FailedPreconditionError(
        "QueueOutermostBackwardCallback: no backward is running on this "
        "thread");
  }
  t_backward_callbacks->front().push_back(std::move(callback));
  return absl::OkStatus();
}

absl::Status RunBackward(const std::vector<Tensor>& roots,
                         const std::vector<Tensor>& grads, bool retain_graph) {
  std::vector<std::vector<std::function<absl::Status()>>> stack;
  if (t_backward_callbacks == nullptr) t_backward_callbacks = &stack;
  t_backward_callbacks->emplace_back();
  absl::Status status = RunBackwardNodes(roots, grads, retain_graph);
  // Callbacks may queue more callbacks; run until none is left.
  for (size_t i = 0; i < t_backward_callbacks->back().size(); ++i) {
    std::function<absl::Status()> callback = t_backward_callbacks->back()[i];
    if (status.ok()) status = callback();
  }
  t_backward_callbacks->pop_back();
  if (t_backward_callbacks == &stack) t_backward_callbacks = nullptr;
  return status;
}

namespace {

absl::Status RunBackwardNodes(const std::vector<Tensor>& roots,
                              const std::vector<Tensor>& grads,
                              bool retain_graph) {
  ReportUntraceable(
      "backward() inside the traced code (it sets .grad tensors a replay "
      "would not; compile the loss function and call backward() on its "
      "result)");
  // Backward itself is not recorded (no double backward).
  NoGradGuard no_grad;
  // Gradients waiting for each node, one slot per node output.
  absl::flat_hash_map<Node*, std::vector<Tensor>> buffers;
  absl::flat_hash_map<Node*, int> dependencies;
  absl::flat_hash_map<Node*, std::shared_ptr<Node>> owners;

  auto add_grad = [&](const Edge& edge, const Tensor& g) -> absl::Status {
    std::vector<Tensor>& slots = buffers[edge.node.get()];
    if (slots.empty()) slots.resize(edge.node->num_outputs());
    Tensor& slot = slots[edge.input_nr];
    if (!slot.defined()) {
      slot = g;
    } else {
      MIXRT_ASSIGN_OR_RETURN(slot, kernels::add(slot, g));
    }
    return absl::OkStatus();
  };

  // Count, for every reachable node, how many edges lead into it.
  std::vector<Node*> stack;
  std::vector<Edge> root_edges;
  for (size_t i = 0; i < roots.size(); ++i) {
    const Edge edge = GradientEdge(roots[i]);
    if (edge.node == nullptr) {
      return absl::FailedPreconditionError(
          "backward: the tensor does not require grad and has no grad_fn "
          "(did you forget requires_grad, or run it under no_grad?)");
    }
    root_edges.push_back(edge);
    if (owners.emplace(edge.node.get(), edge.node).second) {
      stack.push_back(edge.node.get());
    }
  }
  while (!stack.empty()) {
    Node* node = stack.back();
    stack.pop_back();
    for (const Edge& next : node->next_edges()) {
      if (next.node == nullptr) continue;
      ++dependencies[next.node.get()];
      if (owners.emplace(next.node.get(), next.node).second) {
        stack.push_back(next.node.get());
      }
    }
  }
  for (size_t i = 0; i < roots.size(); ++i) {
    MIXRT_RETURN_IF_ERROR(add_grad(root_edges[i], grads[i]));
  }
  std::deque<Node*> ready;
  for (const Edge& e : root_edges) {
    if (dependencies[e.node.get()] == 0 &&
        std::find(ready.begin(), ready.end(), e.node.get()) == ready.end()) {
      ready.push_back(e.node.get());
    }
  }
  while (!ready.empty()) {
    Node* node = ready.front();
    ready.pop_front();
    if (node->released()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "backward: trying to backward through the graph a second time (",
          node->name(),
          "'s saved tensors were freed after the first backward); pass "
          "retain_graph=true to the first backward if you need to"));
    }
    std::vector<Tensor> inputs = std::move(buffers[node]);
    buffers.erase(node);
    inputs.resize(node->num_outputs());
    node->set_frees_saved_after_apply(!retain_graph && node->HoldsSavedState());
    MIXRT_ASSIGN_OR_RETURN(std::vector<Tensor> out,
                           node->Apply(std::move(inputs)));
    // A node's saved tensors are freed as soon as it has run, not when the
    // whole backward ends (as PyTorch does): activations go while parameter
    // gradients arrive, and a checkpointed block's recomputation is freed
    // before the next block's starts.
    if (!retain_graph && node->HoldsSavedState()) {
      node->ReleaseSaved();
      node->mark_released();
    }
    const std::vector<Edge>& edges = node->next_edges();
    for (size_t k = 0; k < edges.size(); ++k) {
      const Edge& next = edges[k];
      if (next.node == nullptr) continue;
      if (k < out.size() && out[k].defined()) {
        MIXRT_RETURN_IF_ERROR(add_grad(next, out[k]));
      }
      if (--dependencies[next.node.get()] == 0)
        ready.push_back(next.node.get());
    }
  }
  return absl::OkStatus();
}

}  // namespace
}  // namespace mixrt
