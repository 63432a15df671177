#include "core/kernels/embedding.h"

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "core/kernels/op_checks.h"
#include "core/tensor/kernel_launch.h"
#include "mixrt/status_macros.h"

namespace mixrt::kernels {
namespace {

absl::StatusOr<Tensor> Indices(const Tensor& indices, absl::string_view op) {
  MIXRT_RETURN_IF_ERROR(CheckDefined(indices, op));
  if (indices.dtype() != DType::kI64 && indices.dtype() != DType::kI32) {
    return absl::InvalidArgumentError(absl::StrCat(
        op, ": indices must be i64 or i32, got ", DTypeName(indices.dtype())));
  }
  if (indices.ndim() >= MIXRT_MAX_DIMS) {
    return absl::InvalidArgumentError(absl::StrCat(op, ": too many dims"));
  }
  return indices.to(DType::kI64);
}

}  // namespace

absl::StatusOr<Tensor> embedding(const Tensor& weight, const Tensor& indices) {
  MIXRT_RETURN_IF_ERROR(CheckFloating(weight, "embedding"));
  MIXRT_RETURN_IF_ERROR(CheckSameDevice(weight, indices, "embedding"));
  if (weight.ndim() != 2) {
    return absl::InvalidArgumentError(
        absl::StrCat("embedding: weight must be [V, D], got ",
                     ShapeToString(weight.shape())));
  }
  MIXRT_ASSIGN_OR_RETURN(Tensor idx, Indices(indices, "embedding"));
  Shape shape = idx.shape();
  shape.push_back(weight.shape()[1]);
  MIXRT_ASSIGN_OR_RETURN(Tensor out,
                         empty(shape, weight.dtype(), weight.device()));
  if (out.numel() == 0 && idx.numel() == 0) return out;
  const Tensor ins[] = {weight, idx};
  const Tensor outs[] = {out};
  MIXRT_RETURN_IF_ERROR(LaunchKernel(MIXRT_OP_EMBEDDING, ins, outs));
  return out;
}

absl::StatusOr<Tensor> embedding_backward(const Tensor& grad_out,
                                          const Tensor& indices,
                                          int64_t num_weights,
                                          int64_t padding_idx) {
  MIXRT_RETURN_IF_ERROR(CheckFloating(grad_out, "embedding_backward"));
  MIXRT_RETURN_IF_ERROR(
      CheckSameDevice(grad_out, indices, "embedding_backward"));
  MIXRT_ASSIGN_OR_RETURN(Tensor idx, Indices(indices, "embedding_backward"));
  if (grad_out.ndim() != idx.ndim() + 1 ||
      absl::Span<const int64_t>(grad_out.shape().data(), idx.ndim()) !=
          absl::Span<const int64_t>(idx.shape())) {
    return absl::InvalidArgumentError(absl::StrCat(
        "embedding_backward: grad_out ", ShapeToString(grad_out.shape()),
        " does not match indices ", ShapeToString(idx.shape()), " + [D]"));
  }
  const int64_t d = grad_out.shape().back();
  MIXRT_ASSIGN_OR_RETURN(
      Tensor gw, empty({num_weights, d}, grad_out.dtype(), grad_out.device()));
  MixrtEmbeddingAttrs attrs{};
  attrs.struct_size = sizeof(attrs);
  attrs.padding_idx = padding_idx;
  const Tensor ins[] = {grad_out, idx};
  const Tensor outs[] = {gw};
  MIXRT_RETURN_IF_ERROR(
      LaunchKernel(MIXRT_OP_EMBEDDING_BACKWARD, ins, outs, &attrs));
  return gw;
}

}  // namespace mixrt::kernels
