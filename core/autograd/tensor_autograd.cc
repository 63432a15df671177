// Tensor's autograd methods (declared in core/tensor/tensor.h).
#include "absl/strings/str_cat.h"
#include "core/autograd/engine.h"
#include "core/autograd/node.h"
#include "core/status_macros.h"
#include "core/tensor/factories.h"

namespace mixrt {

AutogradMeta& Tensor::mutable_autograd_meta() {
  if (meta_ == nullptr) meta_ = std::make_shared<AutogradMeta>();
  return *meta_;
}

bool Tensor::requires_grad() const {
  return meta_ != nullptr && meta_->requires_grad;
}

absl::Status Tensor::set_requires_grad(bool requires_grad) {
  if (!defined()) {
    return absl::FailedPreconditionError("set_requires_grad: undefined tensor");
  }
  if (requires_grad && !IsFloating(dtype_)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "only floating tensors can require gradients; this one is ",
        DTypeName(dtype_)));
  }
  if (!is_leaf()) {
    return absl::FailedPreconditionError(
        "set_requires_grad: only leaves can change requires_grad; use "
        "detach() for a non-leaf");
  }
  mutable_autograd_meta().requires_grad = requires_grad;
  return absl::OkStatus();
}

Tensor Tensor::grad() const {
  return meta_ != nullptr ? meta_->grad : Tensor();
}

void Tensor::set_grad(const Tensor& grad) {
  mutable_autograd_meta().grad = grad;
}

bool Tensor::is_leaf() const {
  return meta_ == nullptr || meta_->grad_fn == nullptr;
}

Tensor Tensor::detach() const {
  return Tensor(storage_, dtype_, shape_, strides_, offset_);
}

absl::Status Tensor::backward() const { return backward(Tensor(), false); }

absl::Status Tensor::backward(const Tensor& gradient, bool retain_graph) const {
  Tensor g = gradient;
  if (!g.defined()) {
    if (numel() != 1) {
      return absl::InvalidArgumentError(absl::StrCat(
          "backward: grad can be implicitly created only for scalar outputs; "
          "this tensor has shape ",
          ShapeToString(shape_), " (pass a gradient)"));
    }
    MIXRT_ASSIGN_OR_RETURN(g, ones(shape_, dtype_, device()));
  } else if (g.shape() != shape_) {
    return absl::InvalidArgumentError(
        absl::StrCat("backward: gradient shape ", ShapeToString(g.shape()),
                     " does not match the tensor's ", ShapeToString(shape_)));
  }
  return RunBackward({*this}, {g}, retain_graph);
}

}  // namespace mixrt
