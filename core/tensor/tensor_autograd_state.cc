// Tensor's autograd state (declared in core/tensor/tensor.h). It is data the
// tensor owns; the autograd layer records and reads it.
#include <algorithm>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "core/tensor/tensor.h"
#include "mixrt/status_macros.h"

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

absl::Status Tensor::set_data(const Tensor& data) {
  MIXRT_RETURN_IF_ERROR(CheckDefined(*this, "set_data"));
  MIXRT_RETURN_IF_ERROR(CheckDefined(data, "set_data"));
  if (data.dtype() != dtype() || data.shape() != shape()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "set_data: the new data is ", DTypeName(data.dtype()), " ",
        ShapeToString(data.shape()), "; expected ", DTypeName(dtype()), " ",
        ShapeToString(shape()), " (this tensor's)"));
  }
  if (!is_leaf()) {
    return absl::FailedPreconditionError(
        "set_data: only a leaf's data can be replaced (this tensor has "
        "history)");
  }
  impl_->storage = data.impl_->storage;
  impl_->strides = data.impl_->strides;
  impl_->offset = data.impl_->offset;
  std::lock_guard<std::mutex> lock(impl_->autograd.accumulator_mutex);
  impl_->autograd.grad = Tensor();
  return absl::OkStatus();
}

absl::StatusOr<int> Tensor::register_post_accumulate_grad_hook(
    std::function<absl::Status(const Tensor& grad)> hook) {
  MIXRT_RETURN_IF_ERROR(
      CheckDefined(*this, "register_post_accumulate_grad_hook"));
  if (!is_leaf() || !requires_grad()) {
    return absl::FailedPreconditionError(
        "register_post_accumulate_grad_hook: only a leaf that requires grad "
        "accumulates a .grad; this tensor is not one");
  }
  AutogradMeta& meta = impl_->autograd;
  std::lock_guard<std::mutex> lock(meta.accumulator_mutex);
  const int id = meta.next_hook_id++;
  meta.post_accumulate_grad_hooks.emplace_back(id, std::move(hook));
  return id;
}

void Tensor::remove_post_accumulate_grad_hook(int id) {
  if (impl_ == nullptr) return;
  AutogradMeta& meta = impl_->autograd;
  std::lock_guard<std::mutex> lock(meta.accumulator_mutex);
  auto& hooks = meta.post_accumulate_grad_hooks;
  hooks.erase(std::remove_if(hooks.begin(), hooks.end(),
                             [id](const auto& h) { return h.first == id; }),
              hooks.end());
}

bool Tensor::is_leaf() const {
  return impl_ == nullptr || impl_->autograd.grad_fn == nullptr;
}

Tensor Tensor::detach() const {
  if (impl_ == nullptr) return Tensor();
  return Tensor(storage(), dtype(), shape(), strides(), offset());
}

}  // namespace mixrt
