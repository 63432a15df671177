#include "core/kernels/pool2d.h"

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "core/kernels/op_checks.h"
#include "core/tensor/kernel_launch.h"
#include "mixrt/status_macros.h"

namespace mixrt::kernels {
namespace {

absl::StatusOr<Shape> OutputShape(const Tensor& x, const Pool2dOptions& o) {
  if (x.ndim() != 4) {
    return absl::InvalidArgumentError(absl::StrCat(
        "pool2d: expected [N, C, H, W], got ", ShapeToString(x.shape())));
  }
  Shape out = {x.shape()[0], x.shape()[1], 0, 0};
  for (int i = 0; i < 2; ++i) {
    if (o.kernel[i] < 1 || o.stride[i] < 1 || o.padding[i] < 0 ||
        2 * o.padding[i] > o.kernel[i]) {
      return absl::InvalidArgumentError(absl::StrCat(
          "pool2d: need kernel, stride >= 1 and 0 <= padding <= kernel / 2; "
          "got kernel ",
          o.kernel[i], ", stride ", o.stride[i], ", padding ", o.padding[i]));
    }
    out[2 + i] =
        (x.shape()[2 + i] + 2 * o.padding[i] - o.kernel[i]) / o.stride[i] + 1;
    if (out[2 + i] <= 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "pool2d: kernel ", o.kernel[i], " is larger than the padded input ",
          x.shape()[2 + i] + 2 * o.padding[i]));
    }
  }
  return out;
}

MixrtPoolAttrs Attrs(const Pool2dOptions& o) {
  MixrtPoolAttrs a{};
  a.struct_size = sizeof(a);
  a.kind = o.kind;
  for (int i = 0; i < 2; ++i) {
    a.kernel[i] = o.kernel[i];
    a.stride[i] = o.stride[i];
    a.padding[i] = o.padding[i];
  }
  return a;
}

}  // namespace

absl::StatusOr<Tensor> pool2d(const Tensor& x, const Pool2dOptions& options) {
  MIXRT_RETURN_IF_ERROR(CheckFloating(x, "pool2d"));
  MIXRT_ASSIGN_OR_RETURN(Shape shape, OutputShape(x, options));
  MIXRT_ASSIGN_OR_RETURN(Tensor out, empty(shape, x.dtype(), x.device()));
  if (out.numel() == 0) return out;
  const MixrtPoolAttrs attrs = Attrs(options);
  const Tensor ins[] = {x};
  const Tensor outs[] = {out};
  MIXRT_RETURN_IF_ERROR(LaunchKernel(MIXRT_OP_POOL2D, ins, outs, &attrs));
  return out;
}

absl::StatusOr<Tensor> pool2d_backward(const Tensor& grad_out, const Tensor& x,
                                       const Pool2dOptions& options) {
  MIXRT_RETURN_IF_ERROR(CheckFloating(x, "pool2d_backward"));
  MIXRT_RETURN_IF_ERROR(CheckFloating(grad_out, "pool2d_backward"));
  MIXRT_RETURN_IF_ERROR(CheckSameDevice(x, grad_out, "pool2d_backward"));
  MIXRT_ASSIGN_OR_RETURN(Shape shape, OutputShape(x, options));
  if (grad_out.shape() != shape) {
    return absl::InvalidArgumentError(absl::StrCat(
        "pool2d_backward: grad_out is ", ShapeToString(grad_out.shape()),
        ", expected ", ShapeToString(shape)));
  }
  MIXRT_ASSIGN_OR_RETURN(Tensor g, grad_out.to(x.dtype()));
  MIXRT_ASSIGN_OR_RETURN(Tensor gx, empty(x.shape(), x.dtype(), x.device()));
  if (gx.numel() == 0) return gx;
  const MixrtPoolAttrs attrs = Attrs(options);
  const Tensor ins[] = {g, x};
  const Tensor outs[] = {gx};
  MIXRT_RETURN_IF_ERROR(
      LaunchKernel(MIXRT_OP_POOL2D_BACKWARD, ins, outs, &attrs));
  return gx;
}

}  // namespace mixrt::kernels
