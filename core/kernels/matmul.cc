#include "core/kernels/matmul.h"

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "core/kernels/op_checks.h"
#include "core/tensor/kernel_launch.h"
#include "mixrt/status_macros.h"

namespace mixrt::kernels {
namespace {

absl::StatusOr<Tensor> MatmulWithBias(const Tensor& a_in, const Tensor& b_in,
                                      const Tensor* bias,
                                      const MatmulOptions& options,
                                      absl::string_view name) {
  MIXRT_RETURN_IF_ERROR(CheckFloating(a_in, name));
  MIXRT_RETURN_IF_ERROR(CheckFloating(b_in, name));
  MIXRT_RETURN_IF_ERROR(CheckSameDevice(a_in, b_in, name));
  if (a_in.ndim() == 0 || b_in.ndim() == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(name, ": both operands need at least one dimension"));
  }
  if (a_in.dtype() != b_in.dtype()) {
    return absl::InvalidArgumentError(
        absl::StrCat(name, ": operands have dtypes ", DTypeName(a_in.dtype()),
                     " and ", DTypeName(b_in.dtype()),
                     "; they must match (cast one, or use autocast)"));
  }
  const DType out_dtype = options.out_dtype.value_or(a_in.dtype());
  if (out_dtype != a_in.dtype() && out_dtype != DType::kF32) {
    return absl::InvalidArgumentError(absl::StrCat(
        name, ": the output dtype must be the inputs' or f32, got ",
        DTypeName(out_dtype)));
  }
  Tensor a = a_in;
  Tensor b = b_in;
  const bool a_vector = a.ndim() == 1;
  const bool b_vector = b.ndim() == 1;
  if (a_vector) {
    MIXRT_ASSIGN_OR_RETURN(a, a.view({1, a.shape()[0]}));
  }
  if (b_vector) {
    MIXRT_ASSIGN_OR_RETURN(b, b.view({b.shape()[0], 1}));
  }
  const int64_t m = a.shape()[a.ndim() - 2];
  const int64_t k = a.shape()[a.ndim() - 1];
  const int64_t n = b.shape()[b.ndim() - 1];
  if (b.shape()[b.ndim() - 2] != k) {
    return absl::InvalidArgumentError(
        absl::StrCat(name, ": shapes ", ShapeToString(a_in.shape()), " and ",
                     ShapeToString(b_in.shape()), " cannot be multiplied (", k,
                     " vs ", b.shape()[b.ndim() - 2], ")"));
  }
  const absl::Span<const int64_t> a_batch(a.shape().data(), a.ndim() - 2);
  const absl::Span<const int64_t> b_batch(b.shape().data(), b.ndim() - 2);
  MIXRT_ASSIGN_OR_RETURN(Shape batch, BroadcastShapes(a_batch, b_batch, name));
  Shape a_shape = batch, b_shape = batch, out_shape = batch;
  a_shape.insert(a_shape.end(), {m, k});
  b_shape.insert(b_shape.end(), {k, n});
  out_shape.insert(out_shape.end(), {m, n});
  MIXRT_ASSIGN_OR_RETURN(a, a.expand(a_shape));
  MIXRT_ASSIGN_OR_RETURN(b, b.expand(b_shape));
  MIXRT_ASSIGN_OR_RETURN(Tensor out, empty(out_shape, out_dtype, a.device()));
  std::vector<Tensor> ins = {a, b};
  if (bias != nullptr && bias->defined()) {
    MIXRT_RETURN_IF_ERROR(CheckSameDevice(a, *bias, name));
    if (bias->ndim() != 1 || bias->shape()[0] != n) {
      return absl::InvalidArgumentError(
          absl::StrCat(name, ": bias has shape ", ShapeToString(bias->shape()),
                       ", expected [", n, "]"));
    }
    MIXRT_ASSIGN_OR_RETURN(Tensor cast_bias, bias->to(a.dtype()));
    ins.push_back(cast_bias);
  }
  if (out.numel() > 0) {
    MixrtMatmulAttrs attrs{};
    attrs.struct_size = sizeof(attrs);
    attrs.activation = options.activation;
    attrs.beta = 0;
    const Tensor outs[] = {out};
    MIXRT_RETURN_IF_ERROR(LaunchKernel(MIXRT_OP_MATMUL, ins, outs, &attrs));
  }
  Shape final_shape = batch;
  if (!a_vector) final_shape.push_back(m);
  if (!b_vector) final_shape.push_back(n);
  if (final_shape == out_shape) return out;
  return out.view(final_shape);
}

}  // namespace

absl::StatusOr<Tensor> matmul(const Tensor& a, const Tensor& b,
                              const MatmulOptions& options) {
  return MatmulWithBias(a, b, nullptr, options, "matmul");
}

absl::StatusOr<Tensor> linear(const Tensor& x, const Tensor& weight,
                              const Tensor& bias,
                              const MatmulOptions& options) {
  MIXRT_RETURN_IF_ERROR(CheckFloating(weight, "linear"));
  if (weight.ndim() != 2) {
    return absl::InvalidArgumentError(
        absl::StrCat("linear: weight must be [out_features, in_features], "
                     "got ",
                     ShapeToString(weight.shape())));
  }
  MIXRT_ASSIGN_OR_RETURN(Tensor wt, weight.transpose(0, 1));
  return MatmulWithBias(x, wt, &bias, options, "linear");
}

}  // namespace mixrt::kernels
