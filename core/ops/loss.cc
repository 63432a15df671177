#include "core/ops/loss.h"

#include "absl/strings/str_cat.h"
#include "core/ops/op_checks.h"
#include "core/ops/pointwise.h"
#include "core/ops/reduce.h"
#include "core/status_macros.h"
#include "core/tensor/factories.h"
#include "core/tensor/kernel_launch.h"

namespace mixrt {
namespace {

absl::StatusOr<Tensor> CheckTargets(const Tensor& logits, const Tensor& target,
                                    const CrossEntropyOptions& options) {
  MIXRT_RETURN_IF_ERROR(CheckFloating(logits, "cross_entropy"));
  MIXRT_RETURN_IF_ERROR(CheckSameDevice(logits, target, "cross_entropy"));
  if (logits.ndim() != 2 || target.ndim() != 1 ||
      target.shape()[0] != logits.shape()[0]) {
    return absl::InvalidArgumentError(absl::StrCat(
        "cross_entropy: expected logits [N, C] and target [N], got ",
        ShapeToString(logits.shape()), " and ", ShapeToString(target.shape())));
  }
  if (target.dtype() != DType::kI64 && target.dtype() != DType::kI32) {
    return absl::InvalidArgumentError(absl::StrCat(
        "cross_entropy: target must hold class indices (i64), got ",
        DTypeName(target.dtype())));
  }
  if (options.label_smoothing < 0 || options.label_smoothing > 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("cross_entropy: label_smoothing ", options.label_smoothing,
                     " is outside [0, 1]"));
  }
  return target.to(DType::kI64);
}

MixrtCrossEntropyAttrs Attrs(const CrossEntropyOptions& options) {
  MixrtCrossEntropyAttrs attrs{};
  attrs.struct_size = sizeof(attrs);
  attrs.ignore_index = options.ignore_index;
  attrs.label_smoothing = options.label_smoothing;
  return attrs;
}

// Number of targets that count towards the mean, as an f32 scalar tensor.
absl::StatusOr<Tensor> CountedTargets(const Tensor& target,
                                      const CrossEntropyOptions& options) {
  MIXRT_ASSIGN_OR_RETURN(Tensor ignore,
                         full({}, static_cast<double>(options.ignore_index),
                              DType::kI64, target.device()));
  MIXRT_ASSIGN_OR_RETURN(Tensor counted, ne(target, ignore));
  MIXRT_ASSIGN_OR_RETURN(counted, counted.to(DType::kF32));
  return sum(counted);
}

}  // namespace

absl::StatusOr<Tensor> cross_entropy(const Tensor& logits, const Tensor& target,
                                     const CrossEntropyOptions& options) {
  MIXRT_ASSIGN_OR_RETURN(Tensor t, CheckTargets(logits, target, options));
  MIXRT_ASSIGN_OR_RETURN(
      Tensor per_sample,
      empty({logits.shape()[0]}, DType::kF32, logits.device()));
  if (logits.numel() > 0) {
    const MixrtCrossEntropyAttrs attrs = Attrs(options);
    const Tensor ins[] = {logits, t};
    const Tensor outs[] = {per_sample};
    MIXRT_RETURN_IF_ERROR(
        LaunchKernel(MIXRT_OP_CROSS_ENTROPY, ins, outs, &attrs));
  }
  switch (options.reduction) {
    case Reduction::kNone:
      return per_sample;
    case Reduction::kSum:
      return sum(per_sample);
    case Reduction::kMean: {
      MIXRT_ASSIGN_OR_RETURN(Tensor total, sum(per_sample));
      MIXRT_ASSIGN_OR_RETURN(Tensor count, CountedTargets(t, options));
      return div(total, count);
    }
  }
  return absl::InternalError("cross_entropy: unknown reduction");
}

absl::StatusOr<Tensor> cross_entropy_backward(
    const Tensor& grad_loss, const Tensor& logits, const Tensor& target,
    const CrossEntropyOptions& options) {
  MIXRT_ASSIGN_OR_RETURN(Tensor t, CheckTargets(logits, target, options));
  MIXRT_RETURN_IF_ERROR(CheckFloating(grad_loss, "cross_entropy_backward"));
  const int64_t rows = logits.shape()[0];
  Tensor per_sample;
  MIXRT_ASSIGN_OR_RETURN(Tensor g, grad_loss.to(DType::kF32));
  if (options.reduction == Reduction::kNone) {
    if (g.ndim() != 1 || g.shape()[0] != rows) {
      return absl::InvalidArgumentError(
          absl::StrCat("cross_entropy_backward: grad_loss must be [", rows,
                       "] for reduction none"));
    }
    per_sample = g;
  } else {
    if (g.numel() != 1) {
      return absl::InvalidArgumentError(
          "cross_entropy_backward: grad_loss must be a scalar");
    }
    MIXRT_ASSIGN_OR_RETURN(g, g.reshape({}));
    if (options.reduction == Reduction::kMean) {
      MIXRT_ASSIGN_OR_RETURN(Tensor count, CountedTargets(t, options));
      MIXRT_ASSIGN_OR_RETURN(g, div(g, count));
    }
    MIXRT_ASSIGN_OR_RETURN(per_sample, g.expand({rows}));
  }
  MIXRT_ASSIGN_OR_RETURN(
      Tensor grad, empty(logits.shape(), logits.dtype(), logits.device()));
  if (logits.numel() > 0) {
    const MixrtCrossEntropyAttrs attrs = Attrs(options);
    const Tensor ins[] = {per_sample, logits, t};
    const Tensor outs[] = {grad};
    MIXRT_RETURN_IF_ERROR(
        LaunchKernel(MIXRT_OP_CROSS_ENTROPY_BACKWARD, ins, outs, &attrs));
  }
  return grad;
}

absl::StatusOr<Tensor> mse_loss(const Tensor& a, const Tensor& b,
                                Reduction reduction) {
  MIXRT_RETURN_IF_ERROR(CheckFloating(a, "mse_loss"));
  MIXRT_RETURN_IF_ERROR(CheckFloating(b, "mse_loss"));
  MIXRT_ASSIGN_OR_RETURN(Tensor d, sub(a, b));
  MIXRT_ASSIGN_OR_RETURN(Tensor sq, mul(d, d));
  switch (reduction) {
    case Reduction::kNone:
      return sq;
    case Reduction::kSum:
      return sum(sq);
    case Reduction::kMean:
      return mean(sq);
  }
  return absl::InternalError("mse_loss: unknown reduction");
}

}  // namespace mixrt
