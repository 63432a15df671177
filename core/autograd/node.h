// The nodes of the autograd graph: each op that needs gradients records a
// Node holding what its backward needs, with edges to the nodes that
// produced its inputs (or to an AccumulateGrad for leaves).
#ifndef MIXRT_CORE_AUTOGRAD_NODE_H_
#define MIXRT_CORE_AUTOGRAD_NODE_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/dtype.h"
#include "core/tensor/tensor.h"

namespace mixrt {

class Node;

struct Edge {
  std::shared_ptr<Node> node;  // Null: this input needs no gradient.
  int input_nr = 0;            // Which input slot of `node`.
};

// Nodes created so far in this process (each node's sequence number is
// the count before it): a tracer tells the nodes a traced call recorded
// from those that were there before.
uint64_t NodesCreated();

class Node {
 public:
  explicit Node(std::string name);
  virtual ~Node() = default;

  // Gradients for each input edge, given one gradient per output (an
  // undefined tensor where an output got none).
  virtual absl::StatusOr<std::vector<Tensor>> Apply(
      std::vector<Tensor> grad_outputs) = 0;
  // Drops saved tensors after a backward without retain_graph.
  virtual void ReleaseSaved() {}
  // False for a node whose backward needs nothing a backward frees (a
  // cast, a leaf's accumulator): it may run in any number of backwards, as
  // a weight cast cached by autocast and used by several forwards must.
  virtual bool HoldsSavedState() const { return true; }

  const std::string& name() const { return name_; }
  std::vector<Edge>& next_edges() { return next_edges_; }
  // Whether input i's gradient goes anywhere (PyTorch's needs_input_grad):
  // an input that does not require grad has no edge, and a backward may
  // skip computing its gradient.
  bool needs_input_grad(size_t i) const {
    return i < next_edges_.size() && next_edges_[i].node != nullptr;
  }
  int num_outputs() const { return num_outputs_; }
  void set_num_outputs(int n) { num_outputs_ = n; }
  uint64_t sequence() const { return sequence_; }
  bool released() const { return released_; }
  void mark_released() { released_ = true; }
  // Set by the engine before Apply: the backward frees this node's saved
  // state once it has run (no retain_graph), so Apply may free each piece
  // as soon as it has used it (a compiled backward's activations).
  bool frees_saved_after_apply() const { return frees_saved_after_apply_; }
  void set_frees_saved_after_apply(bool frees) {
    frees_saved_after_apply_ = frees;
  }

 private:
  std::string name_;
  uint64_t sequence_;
  std::vector<Edge> next_edges_;
  int num_outputs_ = 1;
  bool released_ = false;
  bool frees_saved_after_apply_ = false;
};

// Accumulates into a leaf's .grad, converting to the leaf's dtype (so an f32
// parameter used in f16 under autocast gets an f32 gradient).
class AccumulateGrad : public Node {
 public:
  AccumulateGrad(std::weak_ptr<AutogradMeta> leaf, DType dtype, Shape shape)
      : Node("AccumulateGrad"),
        leaf_(std::move(leaf)),
        dtype_(dtype),
        shape_(std::move(shape)) {}
  absl::StatusOr<std::vector<Tensor>> Apply(
      std::vector<Tensor> grad_outputs) override;
  bool HoldsSavedState() const override { return false; }

 private:
  std::weak_ptr<AutogradMeta> leaf_;
  DType dtype_;
  Shape shape_;
};

// The edge a gradient for `t` flows into (empty when t needs none).
Edge GradientEdge(const Tensor& t);

// True when gradients are being recorded and any of `inputs` requires one.
bool AnyRequiresGrad(std::initializer_list<const Tensor*> inputs);
bool AnyRequiresGrad(const std::vector<Tensor>& inputs);

// Makes `node` the history of `output` (output number `output_nr`).
void SetHistory(Tensor& output, const std::shared_ptr<Node>& node,
                int output_nr = 0);

}  // namespace mixrt

#endif  // MIXRT_CORE_AUTOGRAD_NODE_H_
