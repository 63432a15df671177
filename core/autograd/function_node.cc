#include "core/autograd/function_node.h"

#include "core/autograd/grad_mode.h"
#include "core/tensor/capture_hooks.h"

namespace mixrt {

namespace {

void RecordNode(const std::string& name, const std::vector<Tensor>& inputs,
                std::vector<Tensor*> outputs, std::vector<Tensor> saved,
                MaskedBackwardFn fn, bool stateless) {
  // A trace assumes each leaf it read keeps its requires_grad (a closure
  // tensor or parameter switched off must not keep getting gradients).
  if (CaptureHooks* hooks = ActiveCaptureHooks();
      hooks != nullptr && GradModeEnabled()) {
    for (const Tensor& t : inputs) {
      if (t.defined() && t.is_leaf() && IsFloating(t.dtype()))
        hooks->OnLeafRead(t);
    }
  }
  if (!AnyRequiresGrad(inputs)) return;
  for (Tensor& t : saved) {
    if (t.defined()) t = t.detach();
  }
  auto node = std::make_shared<FunctionNode>(name, std::move(saved),
                                             std::move(fn), stateless);
  for (const Tensor& input : inputs) {
    node->next_edges().push_back(input.defined() ? GradientEdge(input)
                                                 : Edge{});
  }
  node->set_num_outputs(static_cast<int>(outputs.size()));
  for (size_t i = 0; i < outputs.size(); ++i) {
    SetHistory(*outputs[i], node, static_cast<int>(i));
  }
}

// A backward that computes every input gradient, under the masked
// signature.
MaskedBackwardFn IgnoringMask(BackwardFn fn) {
  return [fn = std::move(fn)](const std::vector<Tensor>& grad_outputs,
                              const std::vector<Tensor>& saved,
                              const InputGradMask&) {
    return fn(grad_outputs, saved);
  };
}

}  // namespace

void Record(const std::string& name, const std::vector<Tensor>& inputs,
            std::vector<Tensor*> outputs, std::vector<Tensor> saved,
            BackwardFn fn) {
  RecordNode(name, inputs, std::move(outputs), std::move(saved),
             IgnoringMask(std::move(fn)), /*stateless=*/false);
}

void RecordMasked(const std::string& name, const std::vector<Tensor>& inputs,
                  std::vector<Tensor*> outputs, std::vector<Tensor> saved,
                  MaskedBackwardFn fn) {
  RecordNode(name, inputs, std::move(outputs), std::move(saved), std::move(fn),
             /*stateless=*/false);
}

void RecordStateless(const std::string& name, const std::vector<Tensor>& inputs,
                     std::vector<Tensor*> outputs, BackwardFn fn) {
  RecordNode(name, inputs, std::move(outputs), {}, IgnoringMask(std::move(fn)),
             /*stateless=*/true);
}

}  // namespace mixrt
