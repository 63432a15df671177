#include "core/kernels/batch_norm.h"

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "core/kernels/op_checks.h"
#include "core/tensor/factories.h"
#include "core/tensor/kernel_launch.h"
#include "mixrt/status_macros.h"

namespace mixrt::kernels {
namespace {

absl::Status CheckChannelTensor(const Tensor& x, const Tensor& t,
                                absl::string_view what, bool must_be_f32) {
  MIXRT_RETURN_IF_ERROR(CheckSameDevice(x, t, "batch_norm"));
  if (t.ndim() != 1 || t.shape()[0] != x.shape()[1] ||
      (must_be_f32 && t.dtype() != DType::kF32)) {
    return absl::InvalidArgumentError(
        absl::StrCat("batch_norm: ", what, " must be ",
                     must_be_f32 ? "f32 " : "", "[", x.shape()[1], "], got ",
                     DTypeName(t.dtype()), " ", ShapeToString(t.shape())));
  }
  return absl::OkStatus();
}

// weight (or ones) in x's dtype.
absl::StatusOr<Tensor> Affine(const Tensor& x, const Tensor& t, double fill) {
  if (!t.defined()) return full({x.shape()[1]}, fill, x.dtype(), x.device());
  MIXRT_RETURN_IF_ERROR(CheckChannelTensor(x, t, "weight/bias", false));
  return t.to(x.dtype());
}

MixrtBatchNormAttrs Attrs(bool training, double momentum, double eps) {
  MixrtBatchNormAttrs a{};
  a.struct_size = sizeof(a);
  a.training = training;
  a.momentum = momentum;
  a.eps = eps;
  return a;
}

}  // namespace

absl::StatusOr<BatchNormOutput> batch_norm(
    const Tensor& x, const Tensor& weight, const Tensor& bias,
    const Tensor& running_mean, const Tensor& running_var, bool training,
    double momentum, double eps) {
  MIXRT_RETURN_IF_ERROR(CheckFloating(x, "batch_norm"));
  if (x.ndim() < 2) {
    return absl::InvalidArgumentError(absl::StrCat(
        "batch_norm: expected [N, C, ...], got ", ShapeToString(x.shape())));
  }
  MIXRT_RETURN_IF_ERROR(
      CheckChannelTensor(x, running_mean, "running_mean", true));
  MIXRT_RETURN_IF_ERROR(
      CheckChannelTensor(x, running_var, "running_var", true));
  MIXRT_ASSIGN_OR_RETURN(Tensor w, Affine(x, weight, 1.0));
  MIXRT_ASSIGN_OR_RETURN(Tensor b, Affine(x, bias, 0.0));
  BatchNormOutput out;
  const int64_t c = x.shape()[1];
  MIXRT_ASSIGN_OR_RETURN(out.y, empty(x.shape(), x.dtype(), x.device()));
  MIXRT_ASSIGN_OR_RETURN(out.save_mean, empty({c}, DType::kF32, x.device()));
  MIXRT_ASSIGN_OR_RETURN(out.save_invstd, empty({c}, DType::kF32, x.device()));
  if (x.numel() == 0) return out;
  const MixrtBatchNormAttrs attrs = Attrs(training, momentum, eps);
  const Tensor ins[] = {x, w, b};
  const Tensor outs[] = {out.y, out.save_mean, out.save_invstd, running_mean,
                         running_var};
  MIXRT_RETURN_IF_ERROR(LaunchKernel(MIXRT_OP_BATCH_NORM, ins, outs, &attrs));
  return out;
}

absl::StatusOr<BatchNormGrads> batch_norm_backward(
    const Tensor& grad_y, const Tensor& x, const Tensor& weight,
    const BatchNormOutput& forward, bool training, double eps) {
  MIXRT_RETURN_IF_ERROR(CheckFloating(x, "batch_norm_backward"));
  MIXRT_RETURN_IF_ERROR(CheckFloating(grad_y, "batch_norm_backward"));
  if (grad_y.shape() != x.shape()) {
    return absl::InvalidArgumentError(
        "batch_norm_backward: grad_y and x shapes differ");
  }
  MIXRT_ASSIGN_OR_RETURN(Tensor w, Affine(x, weight, 1.0));
  MIXRT_ASSIGN_OR_RETURN(Tensor g, grad_y.to(x.dtype()));
  const int64_t c = x.shape()[1];
  const DType param_dtype = weight.defined() ? weight.dtype() : DType::kF32;
  BatchNormGrads grads;
  MIXRT_ASSIGN_OR_RETURN(grads.grad_x, empty(x.shape(), x.dtype(), x.device()));
  MIXRT_ASSIGN_OR_RETURN(grads.grad_weight,
                         zeros({c}, param_dtype, x.device()));
  MIXRT_ASSIGN_OR_RETURN(grads.grad_bias, zeros({c}, param_dtype, x.device()));
  if (x.numel() == 0) return grads;
  const MixrtBatchNormAttrs attrs = Attrs(training, 0, eps);
  const Tensor ins[] = {g, x, w, forward.save_mean, forward.save_invstd};
  const Tensor outs[] = {grads.grad_x, grads.grad_weight, grads.grad_bias};
  MIXRT_RETURN_IF_ERROR(
      LaunchKernel(MIXRT_OP_BATCH_NORM_BACKWARD, ins, outs, &attrs));
  return grads;
}

}  // namespace mixrt::kernels
