// Tensor's autograd state (declared in core/tensor/tensor.h). It is data the
// tensor owns; the autograd layer records and reads it.
#include "absl/strings/str_cat.h"
#include "core/tensor/tensor.h"

namespace mixrt {

std::shared_ptr<AutogradMeta> Tensor::autograd_meta() const {
  if (impl_ == nullptr) return nullptr;
  return std::shared_ptr<AutogradMeta>(impl_, &impl_->autograd);
}

AutogradMeta& Tensor::mutable_autograd_meta() const {
  // Only an undefined tensor has none; callers check defined() first, so
  // reaching here is a bug in the caller, not bad user input.
  return impl_->autograd;
}

bool Tensor::requires_grad() const {
  return impl_ != nullptr && impl_->autograd.requires_grad;
}

absl::Status Tensor::set_requires_grad(bool requires_grad) {
  if (absl::Status s = CheckDefined(*this, "set_requires_grad"); !s.ok()) {
    return s;
  }
  if (requires_grad && !IsFloating(dtype())) {
    return absl::InvalidArgumentError(absl::StrCat(
        "only floating tensors can require gradients; this one is ",
        DTypeName(dtype())));
  }
  if (!is_leaf()) {
    return absl::FailedPreconditionError(
        "set_requires_grad: only leaves can change requires_grad; use "
        "detach() for a non-leaf");
  }
  impl_->autograd.requires_grad = requires_grad;
  return absl::OkStatus();
}

Tensor Tensor::grad() const {
  return impl_ != nullptr ? impl_->autograd.grad : Tensor();
}

void Tensor::set_grad(const Tensor& grad) {
  if (impl_ != nullptr) impl_->autograd.grad = grad;
}

bool Tensor::is_leaf() const {
  return impl_ == nullptr || impl_->autograd.grad_fn == nullptr;
}

Tensor Tensor::detach() const {
  if (impl_ == nullptr) return Tensor();
  return Tensor(storage(), dtype(), shape(), strides(), offset());
}

}  // namespace mixrt
