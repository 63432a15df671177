#include "core/tensor/tensor.h"

#include <algorithm>
#include <numeric>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "mixrt/status_macros.h"

namespace mixrt {

Tensor::Tensor(std::shared_ptr<Storage> storage, DType dtype, Shape shape,
               Strides strides, int64_t offset)
    : impl_(std::make_shared<TensorImpl>()) {
  impl_->storage = std::move(storage);
  impl_->dtype = dtype;
  impl_->shape = std::move(shape);
  impl_->strides = std::move(strides);
  impl_->offset = offset;
}

namespace {
const Shape& EmptyShape() {
  static const Shape* empty = new Shape();
  return *empty;
}
const std::shared_ptr<Storage>& NoStorage() {
  static const auto* none = new std::shared_ptr<Storage>();
  return *none;
}
}  // namespace

DType Tensor::dtype() const { return impl_ ? impl_->dtype : DType::kF32; }
const Shape& Tensor::shape() const {
  return impl_ ? impl_->shape : EmptyShape();
}
const Strides& Tensor::strides() const {
  return impl_ ? impl_->strides : EmptyShape();
}
int64_t Tensor::offset() const { return impl_ ? impl_->offset : 0; }
const std::shared_ptr<Storage>& Tensor::storage() const {
  return impl_ ? impl_->storage : NoStorage();
}

absl::Status CheckDefined(const Tensor& t, absl::string_view op) {
  if (t.defined()) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat(op, ": a tensor argument is undefined"));
}

absl::StatusOr<Tensor> empty(absl::Span<const int64_t> shape, DType dtype,
                             const Device& device) {
  if (!device.valid()) {
    return absl::InvalidArgumentError("empty: no device given");
  }
  MIXRT_ASSIGN_OR_RETURN(const int64_t n, CheckedNumElements(shape));
  const uint64_t size = DTypeSize(dtype);
  if (static_cast<uint64_t>(n) > UINT64_MAX / size) {
    return absl::ResourceExhaustedError(
        absl::StrCat("tensor of shape ", ShapeToString(shape), " and dtype ",
                     DTypeName(dtype), " needs more than 2^64 bytes"));
  }
  MIXRT_ASSIGN_OR_RETURN(std::shared_ptr<Storage> storage,
                         Storage::Allocate(device, n * size));
  return Tensor(std::move(storage), dtype, Shape(shape.begin(), shape.end()),
                ContiguousStrides(shape), 0);
}

int64_t Tensor::numel() const {
  int64_t n = 1;
  for (int64_t s : shape()) n *= s;
  return n;
}

const void* Tensor::const_data_ptr() const {
  if (storage() == nullptr || storage()->data() == nullptr) return nullptr;
  return static_cast<const char*>(storage()->data()) +
         offset() * DTypeSize(dtype());
}

void* Tensor::data_ptr() const {
  if (storage() != nullptr) storage()->BumpVersion();
  return const_cast<void*>(const_data_ptr());
}

bool Tensor::is_contiguous() const {
  int64_t expected = 1;
  for (int i = ndim() - 1; i >= 0; --i) {
    if (shape()[i] != 1 && strides()[i] != expected) return false;
    expected *= shape()[i];
  }
  return true;
}

MixrtTensorDesc Tensor::desc() const {
  MixrtTensorDesc d{};
  d.struct_size = sizeof(d);
  // A launch's outputs move their versions when it has run.
  d.data = const_cast<void*>(const_data_ptr());
  d.dtype = ToAbi(dtype());
  d.ndim = ndim();
  d.shape = shape().data();
  d.strides = strides().data();
  return d;
}

namespace {

// Resolves one -1 in `shape` against `numel`.
absl::StatusOr<Shape> InferShape(absl::Span<const int64_t> shape, int64_t numel,
                                 absl::string_view op,
                                 absl::Span<const int64_t> from) {
  Shape out(shape.begin(), shape.end());
  int infer = -1;
  int64_t known = 1;
  for (size_t i = 0; i < out.size(); ++i) {
    if (out[i] == -1) {
      if (infer >= 0) {
        return absl::InvalidArgumentError(absl::StrCat(
            op, ": only one dimension can be -1, got ", ShapeToString(shape)));
      }
      infer = static_cast<int>(i);
    } else if (out[i] < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(op, ": invalid size in ", ShapeToString(shape)));
    } else {
      known *= out[i];
    }
  }
  if (infer >= 0) {
    if (known == 0 || numel % known != 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(op, ": shape ", ShapeToString(shape), " is invalid for ",
                       numel, " elements (from ", ShapeToString(from), ")"));
    }
    out[infer] = numel / known;
    known *= out[infer];
  }
  MIXRT_ASSIGN_OR_RETURN(const int64_t total, CheckedNumElements(out));
  if (total != numel) {
    return absl::InvalidArgumentError(
        absl::StrCat(op, ": shape ", ShapeToString(out), " has ", total,
                     " elements but the tensor of shape ", ShapeToString(from),
                     " has ", numel));
  }
  return out;
}

// Strides for viewing (shape, strides) as new_shape without a copy, if
// possible: each run of merged old dims must be contiguous among itself
// (PyTorch's computeStride).
bool ViewStrides(absl::Span<const int64_t> shape,
                 absl::Span<const int64_t> strides,
                 absl::Span<const int64_t> new_shape, Strides* out) {
  out->assign(new_shape.size(), 0);
  int64_t numel = 1;
  for (int64_t s : shape) numel *= s;
  if (numel == 0 || shape.empty()) {
    *out = ContiguousStrides(new_shape);
    return true;
  }
  int view_d = static_cast<int>(new_shape.size()) - 1;
  int64_t chunk_base_stride = strides.empty() ? 1 : strides.back();
  int64_t tensor_numel = 1;
  int64_t view_numel = 1;
  for (int d = static_cast<int>(shape.size()) - 1; d >= 0; --d) {
    tensor_numel *= shape[d];
    if (d == 0 || (shape[d - 1] != 1 &&
                   strides[d - 1] != tensor_numel * chunk_base_stride)) {
      while (view_d >= 0 &&
             (view_numel < tensor_numel || new_shape[view_d] == 1)) {
        (*out)[view_d] = view_numel * chunk_base_stride;
        view_numel *= new_shape[view_d];
        --view_d;
      }
      if (view_numel != tensor_numel) return false;
      if (d > 0) {
        chunk_base_stride = strides[d - 1];
        tensor_numel = 1;
        view_numel = 1;
      }
    }
  }
  return view_d == -1;
}

}  // namespace

absl::StatusOr<Tensor> Tensor::view(absl::Span<const int64_t> shape) const {
  MIXRT_ASSIGN_OR_RETURN(Shape new_shape,
                         InferShape(shape, numel(), "view", this->shape()));
  Strides new_strides;
  if (!ViewStrides(this->shape(), strides(), new_shape, &new_strides)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "view: a tensor of shape ", ShapeToString(this->shape()),
        " and strides ", ShapeToString(strides()), " cannot be viewed as ",
        ShapeToString(new_shape), " without a copy; use reshape()"));
  }
  return Tensor(storage(), dtype(), std::move(new_shape),
                std::move(new_strides), offset());
}

absl::StatusOr<Tensor> Tensor::reshape(absl::Span<const int64_t> shape) const {
  MIXRT_ASSIGN_OR_RETURN(Shape new_shape,
                         InferShape(shape, numel(), "reshape", this->shape()));
  Strides new_strides;
  if (ViewStrides(this->shape(), strides(), new_shape, &new_strides)) {
    return Tensor(storage(), dtype(), std::move(new_shape),
                  std::move(new_strides), offset());
  }
  MIXRT_ASSIGN_OR_RETURN(Tensor dense, contiguous());
  return dense.view(new_shape);
}

absl::StatusOr<Tensor> Tensor::transpose(int64_t dim0, int64_t dim1) const {
  MIXRT_ASSIGN_OR_RETURN(const int d0, WrapDim(dim0, ndim()));
  MIXRT_ASSIGN_OR_RETURN(const int d1, WrapDim(dim1, ndim()));
  if (ndim() == 0) return *this;
  Shape shape = this->shape();
  Strides strides = this->strides();
  std::swap(shape[d0], shape[d1]);
  std::swap(strides[d0], strides[d1]);
  return Tensor(storage(), dtype(), std::move(shape), std::move(strides),
                offset());
}

absl::StatusOr<Tensor> Tensor::permute(absl::Span<const int64_t> dims) const {
  if (static_cast<int>(dims.size()) != ndim()) {
    return absl::InvalidArgumentError(
        absl::StrCat("permute: got ", dims.size(), " dims ",
                     ShapeToString(dims), " for a ", ndim(), "-d tensor"));
  }
  Shape shape(ndim());
  Strides strides(ndim());
  std::vector<bool> seen(ndim(), false);
  for (int i = 0; i < ndim(); ++i) {
    MIXRT_ASSIGN_OR_RETURN(const int d, WrapDim(dims[i], ndim()));
    if (seen[d]) {
      return absl::InvalidArgumentError(absl::StrCat(
          "permute: dimension ", d, " repeats in ", ShapeToString(dims)));
    }
    seen[d] = true;
    shape[i] = this->shape()[d];
    strides[i] = this->strides()[d];
  }
  return Tensor(storage(), dtype(), std::move(shape), std::move(strides),
                offset());
}

absl::StatusOr<Tensor> Tensor::slice(int64_t dim, int64_t start, int64_t end,
                                     int64_t step) const {
  if (ndim() == 0) {
    return absl::InvalidArgumentError("slice: cannot slice a 0-d tensor");
  }
  MIXRT_ASSIGN_OR_RETURN(const int d, WrapDim(dim, ndim()));
  if (step < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("slice: step must be >= 1, got ", step));
  }
  const int64_t size = this->shape()[d];
  auto clamp = [size](int64_t i) {
    if (i < 0) i += size;
    return std::min(std::max<int64_t>(i, 0), size);
  };
  const int64_t lo = clamp(start);
  const int64_t hi = std::max(clamp(end), lo);
  Shape shape = this->shape();
  Strides strides = this->strides();
  shape[d] = (hi - lo + step - 1) / step;
  strides[d] = this->strides()[d] * step;
  return Tensor(storage(), dtype(), std::move(shape), std::move(strides),
                offset() + lo * this->strides()[d]);
}

absl::StatusOr<Tensor> Tensor::expand(absl::Span<const int64_t> shape) const {
  if (shape.size() < this->shape().size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "expand: target ", ShapeToString(shape), " has fewer dimensions than ",
        ShapeToString(this->shape())));
  }
  const size_t lead = shape.size() - this->shape().size();
  Shape out_shape(shape.size());
  Strides out_strides(shape.size());
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i < lead) {
      if (shape[i] < 0) {
        return absl::InvalidArgumentError(absl::StrCat(
            "expand: new leading dimension ", i, " cannot be ", shape[i]));
      }
      out_shape[i] = shape[i];
      out_strides[i] = 0;
      continue;
    }
    const int64_t have = this->shape()[i - lead];
    const int64_t want = shape[i] == -1 ? have : shape[i];
    if (have == want) {
      out_shape[i] = have;
      out_strides[i] = strides()[i - lead];
    } else if (have == 1 && want >= 0) {
      out_shape[i] = want;
      out_strides[i] = 0;
    } else {
      return absl::InvalidArgumentError(
          absl::StrCat("expand: cannot expand ", ShapeToString(this->shape()),
                       " to ", ShapeToString(shape), " (dimension ", i,
                       ": size ", have, " is not 1)"));
    }
  }
  MIXRT_RETURN_IF_ERROR(CheckedNumElements(out_shape).status());
  return Tensor(storage(), dtype(), std::move(out_shape),
                std::move(out_strides), offset());
}

}  // namespace mixrt
