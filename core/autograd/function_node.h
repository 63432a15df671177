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
// Which inputs' gradients go anywhere, by input position.
using InputGradMask = std::vector<bool>;
// A backward told which input gradients are needed: it may leave the others
// undefined (the first Linear of a network computes no gradient for the
// data, which PyTorch skips too: a ninth of an MLP step's products).
using MaskedBackwardFn = std::function<absl::StatusOr<std::vector<Tensor>>(
    const std::vector<Tensor>& grad_outputs, const std::vector<Tensor>& saved,
    const InputGradMask& needs_input_grad)>;

class FunctionNode : public Node {
 public:
  FunctionNode(std::string name, std::vector<Tensor> saved, MaskedBackwardFn fn,
               bool stateless = false)
      : Node(std::move(name)),
        saved_(std::move(saved)),
        fn_(std::move(fn)),
        stateless_(stateless) {}

  absl::StatusOr<std::vector<Tensor>> Apply(
      std::vector<Tensor> grad_outputs) override {
    InputGradMask needs(next_edges().size());
    for (size_t i = 0; i < needs.size(); ++i) needs[i] = needs_input_grad(i);
    return fn_(grad_outputs, saved_, needs);
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
  MaskedBackwardFn fn_;
  bool stateless_;
};

// Records `fn` as the history of `outputs` when `inputs` need gradients:
// edge i of the node leads to inputs[i]. Saved tensors are kept detached
// (no reference cycles through their own history).
void Record(const std::string& name, const std::vector<Tensor>& inputs,
            std::vector<Tensor*> outputs, std::vector<Tensor> saved,
            BackwardFn fn);
// Record for a backward that computes only the input gradients the mask
// says are needed (undefined tensors in the other positions).
void RecordMasked(const std::string& name, const std::vector<Tensor>& inputs,
                  std::vector<Tensor*> outputs, std::vector<Tensor> saved,
                  MaskedBackwardFn fn);
// Record for a backward that saves nothing and whose closure holds no
// tensor: the node survives backward and may run again (a cast).
void RecordStateless(const std::string& name, const std::vector<Tensor>& inputs,
                     std::vector<Tensor*> outputs, BackwardFn fn);

}  // namespace mixrt

#endif  // MIXRT_CORE_AUTOGRAD_FUNCTION_NODE_H_
