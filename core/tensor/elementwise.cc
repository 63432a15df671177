#include "core/tensor/elementwise.h"

#include "absl/strings/str_cat.h"
#include "core/status_macros.h"
#include "core/tensor/kernel_launch.h"

namespace mixrt {
namespace {

absl::Status CheckOperand(const Tensor& t, absl::string_view op) {
  if (!t.defined()) {
    return absl::InvalidArgumentError(
        absl::StrCat(op, ": an operand is undefined"));
  }
  if (t.dtype() == DType::kBool) {
    return absl::InvalidArgumentError(absl::StrCat(
        op, ": bool tensors are not supported; convert with to(DType::kI64)"));
  }
  return absl::OkStatus();
}

absl::StatusOr<Tensor> Binary(MixrtOp op, absl::string_view name,
                              const Tensor& a, const Tensor& b) {
  MIXRT_RETURN_IF_ERROR(CheckOperand(a, name));
  MIXRT_RETURN_IF_ERROR(CheckOperand(b, name));
  if (a.device() != b.device()) {
    return absl::InvalidArgumentError(absl::StrCat(
        name, ": operands are on different devices (", a.device().ToString(),
        " and ", b.device().ToString(), ")"));
  }
  MIXRT_ASSIGN_OR_RETURN(Shape shape,
                         BroadcastShapes(a.shape(), b.shape(), name));
  const DType dtype = PromoteTypes(a.dtype(), b.dtype());
  MIXRT_ASSIGN_OR_RETURN(Tensor ca, a.to(dtype));
  MIXRT_ASSIGN_OR_RETURN(Tensor cb, b.to(dtype));
  MIXRT_ASSIGN_OR_RETURN(ca, ca.expand(shape));
  MIXRT_ASSIGN_OR_RETURN(cb, cb.expand(shape));
  MIXRT_ASSIGN_OR_RETURN(Tensor out, empty(shape, dtype, a.device()));
  if (out.numel() == 0) return out;
  const Tensor ins[] = {ca, cb};
  const Tensor outs[] = {out};
  MIXRT_RETURN_IF_ERROR(LaunchKernel(op, ins, outs));
  return out;
}

}  // namespace

absl::StatusOr<Tensor> add(const Tensor& a, const Tensor& b) {
  return Binary(MIXRT_OP_ADD, "add", a, b);
}
absl::StatusOr<Tensor> sub(const Tensor& a, const Tensor& b) {
  return Binary(MIXRT_OP_SUB, "sub", a, b);
}
absl::StatusOr<Tensor> mul(const Tensor& a, const Tensor& b) {
  return Binary(MIXRT_OP_MUL, "mul", a, b);
}
absl::StatusOr<Tensor> div(const Tensor& a, const Tensor& b) {
  return Binary(MIXRT_OP_DIV, "div", a, b);
}

absl::StatusOr<Tensor> neg(const Tensor& a) {
  MIXRT_RETURN_IF_ERROR(CheckOperand(a, "neg"));
  MIXRT_ASSIGN_OR_RETURN(Tensor out, empty(a.shape(), a.dtype(), a.device()));
  if (out.numel() == 0) return out;
  const Tensor ins[] = {a};
  const Tensor outs[] = {out};
  MIXRT_RETURN_IF_ERROR(LaunchKernel(MIXRT_OP_NEG, ins, outs));
  return out;
}

}  // namespace mixrt
