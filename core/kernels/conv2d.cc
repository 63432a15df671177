#include "core/kernels/conv2d.h"

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "core/kernels/op_checks.h"
#include "core/tensor/kernel_launch.h"
#include "mixrt/status_macros.h"

namespace mixrt::kernels {
namespace {

MixrtConvAttrs Attrs(const Conv2dOptions& o) {
  MixrtConvAttrs a{};
  a.struct_size = sizeof(a);
  for (int i = 0; i < 2; ++i) {
    a.stride[i] = o.stride[i];
    a.padding[i] = o.padding[i];
    a.dilation[i] = o.dilation[i];
  }
  a.groups = o.groups;
  a.activation = o.activation;
  return a;
}

// Validates shapes and options; returns the output shape.
absl::StatusOr<Shape> OutputShape(absl::Span<const int64_t> x,
                                  absl::Span<const int64_t> w,
                                  const Conv2dOptions& o) {
  if (x.size() != 4 || w.size() != 4) {
    return absl::InvalidArgumentError(absl::StrCat(
        "conv2d: expected x [N, C, H, W] and weight [O, C/groups, kh, kw], "
        "got ",
        ShapeToString(x), " and ", ShapeToString(w)));
  }
  for (int i = 0; i < 2; ++i) {
    if (o.stride[i] < 1 || o.padding[i] < 0 || o.dilation[i] < 1) {
      return absl::InvalidArgumentError(
          "conv2d: stride and dilation must be >= 1, padding >= 0");
    }
  }
  if (o.groups < 1 || x[1] % o.groups != 0 || w[0] % o.groups != 0 ||
      w[1] * o.groups != x[1]) {
    return absl::InvalidArgumentError(
        absl::StrCat("conv2d: ", x[1], " input channels and weight ",
                     ShapeToString(w), " do not fit groups=", o.groups));
  }
  Shape out = {
      x[0], w[0],
      Conv2dOutputSize(x[2], w[2], o.stride[0], o.padding[0], o.dilation[0]),
      Conv2dOutputSize(x[3], w[3], o.stride[1], o.padding[1], o.dilation[1])};
  if (out[2] <= 0 || out[3] <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("conv2d: the kernel ", ShapeToString(w),
                     " does not fit the padded ", "input ", ShapeToString(x)));
  }
  return out;
}

}  // namespace

int64_t Conv2dOutputSize(int64_t in, int64_t kernel, int32_t stride,
                         int32_t padding, int32_t dilation) {
  return (in + 2 * padding - dilation * (kernel - 1) - 1) / stride + 1;
}

absl::StatusOr<Tensor> conv2d(const Tensor& x, const Tensor& weight,
                              const Tensor& bias,
                              const Conv2dOptions& options) {
  MIXRT_RETURN_IF_ERROR(CheckFloating(x, "conv2d"));
  MIXRT_RETURN_IF_ERROR(CheckFloating(weight, "conv2d"));
  MIXRT_RETURN_IF_ERROR(CheckSameDevice(x, weight, "conv2d"));
  if (x.dtype() != weight.dtype()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "conv2d: input and weight dtypes differ (", DTypeName(x.dtype()),
        " and ", DTypeName(weight.dtype()), ")"));
  }
  MIXRT_ASSIGN_OR_RETURN(Shape out_shape,
                         OutputShape(x.shape(), weight.shape(), options));
  std::vector<Tensor> ins = {x, weight};
  if (bias.defined()) {
    MIXRT_RETURN_IF_ERROR(CheckSameDevice(x, bias, "conv2d"));
    if (bias.ndim() != 1 || bias.shape()[0] != weight.shape()[0]) {
      return absl::InvalidArgumentError(
          absl::StrCat("conv2d: bias has shape ", ShapeToString(bias.shape()),
                       ", expected [", weight.shape()[0], "]"));
    }
    MIXRT_ASSIGN_OR_RETURN(Tensor b, bias.to(x.dtype()));
    ins.push_back(b);
  }
  MIXRT_ASSIGN_OR_RETURN(Tensor out, empty(out_shape, x.dtype(), x.device()));
  if (out.numel() == 0) return out;
  const MixrtConvAttrs attrs = Attrs(options);
  const Tensor outs[] = {out};
  MIXRT_RETURN_IF_ERROR(LaunchKernel(MIXRT_OP_CONV2D, ins, outs, &attrs));
  return out;
}

absl::StatusOr<Tensor> conv2d_backward_data(const Tensor& grad_out,
                                            const Tensor& weight,
                                            absl::Span<const int64_t> x_shape,
                                            const Conv2dOptions& options) {
  MIXRT_RETURN_IF_ERROR(CheckFloating(grad_out, "conv2d_backward_data"));
  MIXRT_RETURN_IF_ERROR(
      CheckSameDevice(grad_out, weight, "conv2d_backward_data"));
  MIXRT_ASSIGN_OR_RETURN(Shape out_shape,
                         OutputShape(x_shape, weight.shape(), options));
  if (grad_out.shape() != out_shape) {
    return absl::InvalidArgumentError(absl::StrCat(
        "conv2d_backward_data: grad_out is ", ShapeToString(grad_out.shape()),
        ", expected ", ShapeToString(out_shape)));
  }
  MIXRT_ASSIGN_OR_RETURN(Tensor w, weight.to(grad_out.dtype()));
  MIXRT_ASSIGN_OR_RETURN(Tensor gx,
                         empty(x_shape, grad_out.dtype(), grad_out.device()));
  if (gx.numel() == 0) return gx;
  const MixrtConvAttrs attrs = Attrs(options);
  const Tensor ins[] = {grad_out, w};
  const Tensor outs[] = {gx};
  MIXRT_RETURN_IF_ERROR(
      LaunchKernel(MIXRT_OP_CONV2D_BACKWARD_DATA, ins, outs, &attrs));
  return gx;
}

absl::StatusOr<Conv2dWeightGrads> conv2d_backward_weights(
    const Tensor& grad_out, const Tensor& x,
    absl::Span<const int64_t> weight_shape, bool with_bias,
    const Conv2dOptions& options) {
  MIXRT_RETURN_IF_ERROR(CheckFloating(grad_out, "conv2d_backward_weights"));
  MIXRT_RETURN_IF_ERROR(
      CheckSameDevice(grad_out, x, "conv2d_backward_weights"));
  MIXRT_ASSIGN_OR_RETURN(Shape out_shape,
                         OutputShape(x.shape(), weight_shape, options));
  if (grad_out.shape() != out_shape) {
    return absl::InvalidArgumentError(
        absl::StrCat("conv2d_backward_weights: grad_out is ",
                     ShapeToString(grad_out.shape()), ", expected ",
                     ShapeToString(out_shape)));
  }
  MIXRT_ASSIGN_OR_RETURN(Tensor xc, x.to(grad_out.dtype()));
  Conv2dWeightGrads grads;
  MIXRT_ASSIGN_OR_RETURN(
      grads.grad_weight,
      empty(weight_shape, grad_out.dtype(), grad_out.device()));
  std::vector<Tensor> outs = {grads.grad_weight};
  if (with_bias) {
    MIXRT_ASSIGN_OR_RETURN(
        grads.grad_bias,
        empty({weight_shape[0]}, grad_out.dtype(), grad_out.device()));
    outs.push_back(grads.grad_bias);
  }
  const MixrtConvAttrs attrs = Attrs(options);
  const Tensor ins[] = {grad_out, xc};
  MIXRT_RETURN_IF_ERROR(
      LaunchKernel(MIXRT_OP_CONV2D_BACKWARD_WEIGHTS, ins, outs, &attrs));
  return grads;
}

}  // namespace mixrt::kernels
