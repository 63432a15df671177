#include "core/kernels/softmax.h"

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "core/kernels/op_checks.h"
#include "core/tensor/kernel_launch.h"
#include "mixrt/status_macros.h"

namespace mixrt::kernels {
namespace {

absl::StatusOr<Tensor> Launch(MixrtOp op, absl::string_view name,
                              std::vector<Tensor> ins, int64_t dim) {
  for (const Tensor& t : ins) MIXRT_RETURN_IF_ERROR(CheckFloating(t, name));
  for (size_t i = 1; i < ins.size(); ++i) {
    MIXRT_RETURN_IF_ERROR(CheckSameDevice(ins[0], ins[i], name));
    if (ins[i].shape() != ins[0].shape() || ins[i].dtype() != ins[0].dtype()) {
      return absl::InvalidArgumentError(absl::StrCat(
          name, ": the gradient and output must have one shape and dtype"));
    }
  }
  const Tensor& x = ins[0];
  Tensor src = x;
  // A 0-d tensor is treated as one row of one element.
  if (x.ndim() == 0) {
    MIXRT_ASSIGN_OR_RETURN(src, x.view({1}));
  }
  MIXRT_ASSIGN_OR_RETURN(const int axis, WrapDim(dim, src.ndim()));
  if (x.ndim() == 0) {
    for (Tensor& t : ins) {
      MIXRT_ASSIGN_OR_RETURN(t, t.view({1}));
    }
  }
  MIXRT_ASSIGN_OR_RETURN(Tensor out,
                         empty(ins[0].shape(), x.dtype(), x.device()));
  if (out.numel() > 0) {
    MixrtAxisAttrs attrs{};
    attrs.struct_size = sizeof(attrs);
    attrs.axis = axis;
    const Tensor outs[] = {out};
    MIXRT_RETURN_IF_ERROR(LaunchKernel(op, ins, outs, &attrs));
  }
  return x.ndim() == 0 ? out.view({}) : absl::StatusOr<Tensor>(out);
}

}  // namespace

absl::StatusOr<Tensor> softmax(const Tensor& x, int64_t dim) {
  return Launch(MIXRT_OP_SOFTMAX, "softmax", {x}, dim);
}
absl::StatusOr<Tensor> log_softmax(const Tensor& x, int64_t dim) {
  return Launch(MIXRT_OP_LOG_SOFTMAX, "log_softmax", {x}, dim);
}
absl::StatusOr<Tensor> softmax_backward(const Tensor& grad_y, const Tensor& y,
                                        int64_t dim) {
  return Launch(MIXRT_OP_SOFTMAX_BACKWARD, "softmax_backward", {grad_y, y},
                dim);
}
absl::StatusOr<Tensor> log_softmax_backward(const Tensor& grad_y,
                                            const Tensor& y, int64_t dim) {
  return Launch(MIXRT_OP_LOG_SOFTMAX_BACKWARD, "log_softmax_backward",
                {grad_y, y}, dim);
}

}  // namespace mixrt::kernels
