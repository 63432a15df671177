// A backward node made from a function: the saved tensors and a closure
// computing input gradients from output gradients. Every differentiable
// mixrt:: op records one.
#ifndef MIXRT_CORE_AUTOGRAD_FUNCTION_NODE_H_
#define MIXRT_CORE_AUTOGRAD_FUNCTION_NODE_H_

#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/autograd/node.h"

namespace mixrt {

using BackwardFn = std::function<absl::StatusOr<std::vector<Tensor>>(
    const std::vector<Tensor>& grad_outputs, const std::vector<Tensor>& saved)>;

class FunctionNode : public Node {
 public:
  FunctionNode(std::string name, std::vector<Tensor> saved, BackwardFn fn,
               bool stateless = false)
      : Node(std::move(name)),
        saved_(std::move(saved)),
        fn_(std::move(fn)),
        stateless_(stateless) {}

  absl::StatusOr<std::vector<Tensor>> Apply(
      std::vector<Tensor> grad_outputs) override {
    return fn_(grad_outputs, saved_);
  }
  // The closure goes too: the tensors it captured (forward outputs, masks)
  // are saved tensors as much as saved_ is.
  void ReleaseSaved() override {
    if (stateless_) return;
    saved_.clear();
    fn_ = nullptr;
  }
  bool HoldsSavedState() const override { return !stateless_; }

 private:
  std::vector<Tensor> saved_;
  BackwardFn fn_;
  bool stateless_;
};

// Records `fn` as the history of `outputs` when `inputs` need gradients:
// edge i of the node leads to inputs[i]. Saved tensors are kept detached
// (no reference cycles through their own history).
void Record(const std::string& name, const std::vector<Tensor>& inputs,
            std::vector<Tensor*> outputs, std::vector<Tensor> saved,
            BackwardFn fn);
// Record for a backward that saves nothing and whose closure holds no
// tensor: the node survives backward and may run again (a cast).
void RecordStateless(const std::string& name, const std::vector<Tensor>& inputs,
                     std::vector<Tensor*> outputs, BackwardFn fn);

}  // namespace mixrt

#endif  // MIXRT_CORE_AUTOGRAD_FUNCTION_NODE_H_
