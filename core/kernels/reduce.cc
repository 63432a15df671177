#include "core/kernels/reduce.h"

#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "core/kernels/op_checks.h"
#include "core/kernels/pointwise.h"
#include "core/plugin/backend.h"
#include "core/tensor/factories.h"
#include "core/tensor/kernel_launch.h"
#include "mixrt/status_macros.h"

namespace mixrt::kernels {

absl::StatusOr<Tensor> reduce(MixrtReduceKind kind, const Tensor& x,
                              absl::Span<const int64_t> dims, bool keepdim,
                              double correction, std::optional<DType> dtype) {
  static constexpr const char* kNames[MIXRT_REDUCE_COUNT] = {
      "sum", "mean", "amax", "amin", "abs_max", "var"};
  const char* name = kNames[kind];
  MIXRT_RETURN_IF_ERROR(CheckFloating(x, name));
  const DType out_dtype = dtype.value_or(x.dtype());
  if (out_dtype != x.dtype() && out_dtype != DType::kF32) {
    return absl::InvalidArgumentError(absl::StrCat(
        name, ": dtype must be the input's (", DTypeName(x.dtype()),
        ") or f32, got ", DTypeName(out_dtype)));
  }
  uint32_t mask = 0;
  if (dims.empty()) {
    mask = (1u << x.ndim()) - 1u;
  } else {
    for (int64_t d : dims) {
      MIXRT_ASSIGN_OR_RETURN(const int wrapped, WrapDim(d, x.ndim()));
      if (x.ndim() > 0 && (mask & (1u << wrapped))) {
        return absl::InvalidArgumentError(
            absl::StrCat(name, ": dim ", wrapped, " appears more than once in ",
                         ShapeToString(dims)));
      }
      if (x.ndim() > 0) mask |= 1u << wrapped;
    }
  }
  Shape kept = x.shape();
  Shape dropped;
  for (int d = 0; d < x.ndim(); ++d) {
    if (mask & (1u << d)) {
      if ((kind == MIXRT_REDUCE_MAX || kind == MIXRT_REDUCE_MIN ||
           kind == MIXRT_REDUCE_ABS_MAX) &&
          x.shape()[d] == 0) {
        return absl::InvalidArgumentError(
            absl::StrCat(name, ": cannot reduce over dim ", d,
                         " of size 0 (the result has no identity)"));
      }
      kept[d] = 1;
    } else {
      dropped.push_back(x.shape()[d]);
    }
  }
  if (out_dtype != x.dtype() && x.device().backend() != nullptr &&
      x.device().backend()->identity().abi_minor < 2) {
    // A wider output is ABI 1.2's: a plugin built before may claim the pair
    // from its dtype masks yet write its input's dtype. The same value the
    // old way: widen, then reduce.
    MIXRT_ASSIGN_OR_RETURN(Tensor wide, x.to(out_dtype));
    return reduce(kind, wide, dims, keepdim, correction);
  }
  MIXRT_ASSIGN_OR_RETURN(Tensor out, empty(kept, out_dtype, x.device()));
  if (out.numel() > 0) {
    MixrtReduceAttrs attrs{};
    attrs.struct_size = sizeof(attrs);
    attrs.kind = kind;
    attrs.axes_mask = mask;
    attrs.correction = correction;
    const Tensor ins[] = {x};
    const Tensor outs[] = {out};
    MIXRT_RETURN_IF_ERROR(LaunchKernel(MIXRT_OP_REDUCE, ins, outs, &attrs));
  }
  if (keepdim) return out;
  return out.view(dropped);
}

absl::StatusOr<Tensor> sum(const Tensor& x, absl::Span<const int64_t> dims,
                           bool keepdim, std::optional<DType> dtype) {
  return reduce(MIXRT_REDUCE_SUM, x, dims, keepdim, 0, dtype);
}
absl::StatusOr<Tensor> mean(const Tensor& x, absl::Span<const int64_t> dims,
                            bool keepdim) {
  return reduce(MIXRT_REDUCE_MEAN, x, dims, keepdim);
}
absl::StatusOr<Tensor> amax(const Tensor& x, absl::Span<const int64_t> dims,
                            bool keepdim) {
  return reduce(MIXRT_REDUCE_MAX, x, dims, keepdim);
}
absl::StatusOr<Tensor> amin(const Tensor& x, absl::Span<const int64_t> dims,
                            bool keepdim) {
  return reduce(MIXRT_REDUCE_MIN, x, dims, keepdim);
}
absl::StatusOr<Tensor> abs_max(const Tensor& x, absl::Span<const int64_t> dims,
                               bool keepdim) {
  return reduce(MIXRT_REDUCE_ABS_MAX, x, dims, keepdim);
}
absl::StatusOr<Tensor> var(const Tensor& x, absl::Span<const int64_t> dims,
                           double correction, bool keepdim) {
  return reduce(MIXRT_REDUCE_VAR, x, dims, keepdim, correction);
}
absl::StatusOr<Tensor> std(const Tensor& x, absl::Span<const int64_t> dims,
                           double correction, bool keepdim) {
  MIXRT_ASSIGN_OR_RETURN(Tensor v, var(x, dims, correction, keepdim));
  return sqrt(v);
}

namespace {

absl::StatusOr<Tensor> NormTensorByTensor(absl::Span<const Tensor> tensors,
                                          const Device& device) {
  MIXRT_ASSIGN_OR_RETURN(Tensor total, zeros({1}, DType::kF32, device));
  for (const Tensor& t : tensors) {
    MIXRT_ASSIGN_OR_RETURN(Tensor t32, t.to(DType::kF32));
    MIXRT_ASSIGN_OR_RETURN(Tensor sq, mul(t32, t32));
    MIXRT_ASSIGN_OR_RETURN(Tensor s, sum(sq));
    MIXRT_ASSIGN_OR_RETURN(s, s.reshape({1}));
    MIXRT_ASSIGN_OR_RETURN(total, add(total, s));
  }
  return sqrt(total);
}

}  // namespace

absl::StatusOr<Tensor> multi_tensor_norm(absl::Span<const Tensor> tensors,
                                         const Device& device) {
  constexpr absl::string_view kOp = "multi_tensor_norm";
  std::vector<Tensor> inputs;
  for (const Tensor& t : tensors) {
    MIXRT_RETURN_IF_ERROR(CheckFloating(t, kOp));
    if (t.device() != device) {
      return absl::InvalidArgumentError(absl::StrCat(
          kOp, ": a tensor is on ", t.device().ToString(), ", not ",
          device.ToString(), " (clip each device's gradients separately)"));
    }
    MIXRT_ASSIGN_OR_RETURN(Tensor c, t.contiguous());
    inputs.push_back(std::move(c));
  }
  if (device.backend()->identity().abi_minor < 1) {
    return NormTensorByTensor(inputs, device);
  }
  MIXRT_ASSIGN_OR_RETURN(Tensor norm, empty({1}, DType::kF32, device));
  const Tensor outs[] = {norm};
  const absl::Status launched =
      LaunchKernel(MIXRT_OP_MULTI_TENSOR_NORM, inputs, outs);
  if (absl::IsUnimplemented(launched)) {
    return NormTensorByTensor(inputs, device);
  }
  MIXRT_RETURN_IF_ERROR(launched);
  return norm;
}

}  // namespace mixrt::kernels
