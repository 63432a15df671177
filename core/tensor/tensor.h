// A tensor: a view (dtype, shape, strides, offset) on refcounted device
// storage. A Tensor is a handle to one TensorImpl, like c10's: copying a
// Tensor copies the handle, not the data, and every copy sees what another
// learns (requires_grad, grad, history). Operations that can fail on user
// input return absl::Status / absl::StatusOr.
//
//   mixrt::Device dev = *mixrt::Registry::Global().SelectDevice();
//   mixrt::Tensor a = *mixrt::arange(0, 6, 1, mixrt::DType::kF32, dev);
//   mixrt::Tensor m = *a.reshape({2, 3});
//   mixrt::Tensor t = *m.transpose(0, 1);       // a view, no copy
//   mixrt::Tensor h = *t.to(mixrt::DType::kF16); // a new tensor
//   std::cout << t.ToString();
#ifndef MIXRT_CORE_TENSOR_TENSOR_H_
#define MIXRT_CORE_TENSOR_TENSOR_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "core/dtype.h"
#include "core/plugin/device.h"
#include "core/tensor/shape.h"
#include "core/tensor/storage.h"
#include "mixrt/plugin_api.h"

namespace mixrt {

struct TensorImpl;
struct AutogradMeta;
class Node;

class Tensor {
 public:
  Tensor() = default;  // Undefined: defined() is false.

  // A view on `storage`; the caller guarantees the view fits.
  Tensor(std::shared_ptr<Storage> storage, DType dtype, Shape shape,
         Strides strides, int64_t offset);

  bool defined() const { return impl_ != nullptr; }
  // An undefined tensor reports f32, shape [] and no storage.
  DType dtype() const;
  const Shape& shape() const;
  const Strides& strides() const;
  int64_t offset() const;  // In elements.
  int ndim() const { return static_cast<int>(shape().size()); }
  int64_t numel() const;
  const Device& device() const { return storage()->device(); }
  const std::shared_ptr<Storage>& storage() const;
  // Device address of the view's first element, for writing: handing it
  // out counts as a write (the storage's version moves, as an in-place op
  // moves it), so autocast's cached weight casts and compiled graphs'
  // kept results computed from this memory are made again. Write through
  // the pointer before the next op reads the tensor; a pointer kept and
  // written later is not seen. const_data_ptr() reads without a version
  // move.
  void* data_ptr() const;
  const void* const_data_ptr() const;
  bool is_contiguous() const;
  // True when both views use the same storage.
  bool shares_storage_with(const Tensor& other) const {
    return storage() == other.storage();
  }
  // True when both are handles to one tensor (one autograd state).
  bool is_same(const Tensor& other) const { return impl_ == other.impl_; }

  // ---- Views (no copy) ----
  // Same elements in a new shape; one size may be -1. Fails when the strides
  // do not allow a view (use reshape, which copies then).
  absl::StatusOr<Tensor> view(absl::Span<const int64_t> shape) const;
  // view() when possible, else a contiguous copy reshaped.
  absl::StatusOr<Tensor> reshape(absl::Span<const int64_t> shape) const;
  absl::StatusOr<Tensor> transpose(int64_t dim0, int64_t dim1) const;
  absl::StatusOr<Tensor> permute(absl::Span<const int64_t> dims) const;
  // Elements start, start+step, ... < end along dim (Python slice rules for
  // negative and out-of-range bounds); step >= 1.
  absl::StatusOr<Tensor> slice(int64_t dim, int64_t start, int64_t end,
                               int64_t step = 1) const;
  // Broadcasts size-1 dims (stride 0) and prepends dims; -1 keeps a size.
  absl::StatusOr<Tensor> expand(absl::Span<const int64_t> shape) const;

  // ---- Copies ----
  // This tensor if already contiguous, else a dense copy.
  absl::StatusOr<Tensor> contiguous() const;
  // A converted copy (round to nearest even), or this tensor if same dtype.
  absl::StatusOr<Tensor> to(DType dtype) const;
  // A copy on `device`, or this tensor if already there.
  absl::StatusOr<Tensor> to(const Device& device) const;
  // An independent dense copy.
  absl::StatusOr<Tensor> clone() const;

  // ---- Host access ----
  // The single element of a one-element tensor.
  absl::StatusOr<double> item() const;
  // All elements in row-major order, converted exactly to float/double.
  absl::StatusOr<std::vector<float>> to_float_vector() const;
  absl::StatusOr<std::vector<double>> to_double_vector() const;
  absl::StatusOr<std::vector<int64_t>> to_int_vector() const;
  // Raw bytes of the contiguous data in this tensor's dtype.
  absl::StatusOr<std::vector<uint8_t>> to_bytes() const;

  // "tensor([[1, 2], [3, 4]], dtype=f32, device=cpu:0)"; large tensors are
  // summarized.
  std::string ToString() const;

  // The ABI descriptor; valid while this Tensor is alive and unmodified.
  MixrtTensorDesc desc() const;

  // ---- Autograd ----
  // Copies of a Tensor handle share their autograd state, like a PyTorch
  // tensor object. View and copy methods above return tensors without
  // history; the mixrt:: ops record it.
  bool requires_grad() const;
  // Marks a leaf as needing gradients; floating leaves only.
  absl::Status set_requires_grad(bool requires_grad);
  // The accumulated gradient, or an undefined tensor.
  Tensor grad() const;
  void set_grad(const Tensor& grad);
  // PyTorch's `param.data = data`: this tensor (every handle on it, so a
  // model's and an optimizer's) now views `data`'s memory, on `data`'s
  // device, keeping its autograd identity and requires_grad. Its gradient
  // is dropped (it belonged to the old memory's device). Same dtype and
  // shape only; a tensor with history is refused.
  absl::Status set_data(const Tensor& data);
  bool is_leaf() const;
  // PyTorch's register_post_accumulate_grad_hook, on a leaf that requires
  // grad: `hook` runs with the new .grad each time backward has accumulated
  // into it (DistributedDataParallel starts a bucket's all-reduce from
  // here). An error from a hook fails the backward. Returns an id for
  // remove_post_accumulate_grad_hook.
  absl::StatusOr<int> register_post_accumulate_grad_hook(
      std::function<absl::Status(const Tensor& grad)> hook);
  void remove_post_accumulate_grad_hook(int id);
  // The same data with no autograd history.
  Tensor detach() const;
  // Back-propagates from this tensor: a scalar, unless `gradient` (same shape)
  // is given. Gradients accumulate into the .grad of leaves. Defined by the
  // autograd layer (core/autograd/tensor_backward.cc), which runs the engine.
  absl::Status backward() const;
  absl::Status backward(const Tensor& gradient, bool retain_graph) const;
  // Internal: the autograd state, created with the tensor; null when
  // undefined. The pointer keeps the whole tensor alive.
  std::shared_ptr<AutogradMeta> autograd_meta() const;
  AutogradMeta& mutable_autograd_meta() const;

 private:
  std::shared_ptr<TensorImpl> impl_;
};

// What the autograd layer keeps per tensor. The data lives here, with the
// tensor, so that every handle shares it from the start; the autograd layer
// (core/autograd) gives it meaning.
struct AutogradMeta {
  bool requires_grad = false;
  Tensor grad;
  std::shared_ptr<Node> grad_fn;  // Null for leaves.
  int output_nr = 0;
  // The leaf's accumulator, shared by every use of the leaf in a graph.
  // Created on first use, so threads recording graphs over one shared
  // parameter race for it: guarded by accumulator_mutex, as is `grad` while
  // AccumulateGrad adds into it (PyTorch's AutogradMeta mutex).
  std::weak_ptr<Node> grad_accumulator;
  std::mutex accumulator_mutex;
  // Run by AccumulateGrad after each accumulation, in registration order;
  // guarded by accumulator_mutex.
  std::vector<std::pair<int, std::function<absl::Status(const Tensor&)>>>
      post_accumulate_grad_hooks;
  int next_hook_id = 0;
};

// One tensor: its view of the storage and its autograd state.
struct TensorImpl {
  std::shared_ptr<Storage> storage;
  DType dtype = DType::kF32;
  Shape shape;
  Strides strides;
  int64_t offset = 0;
  AutogradMeta autograd;
};

// The one error for an undefined tensor handed to `op`, wherever it is
// found: InvalidArgument naming the op.
absl::Status CheckDefined(const Tensor& t, absl::string_view op);

// A new uninitialized contiguous tensor.
absl::StatusOr<Tensor> empty(absl::Span<const int64_t> shape, DType dtype,
                             const Device& device);

}  // namespace mixrt

#endif  // MIXRT_CORE_TENSOR_TENSOR_H_
