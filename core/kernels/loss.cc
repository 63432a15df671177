#include "core/kernels/loss.h"

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "core/kernels/op_checks.h"
#include "core/kernels/pointwise.h"
#include "core/kernels/reduce.h"
#include "core/tensor/factories.h"
#include "core/tensor/kernel_launch.h"
#include "mixrt/status_macros.h"

namespace mixrt::kernels {
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

MixrtCrossEntropyAttrs Attrs(const CrossEntropyOptions& options,
                             bool log_probs_input) {
  MixrtCrossEntropyAttrs attrs{};
  attrs.struct_size = sizeof(attrs);
  attrs.ignore_index = options.ignore_index;
  attrs.label_smoothing = options.label_smoothing;
  attrs.log_probs_input = log_probs_input;
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

absl::StatusOr<Tensor> ClassLoss(const Tensor& logits, const Tensor& target,
                                 const CrossEntropyOptions& options,
                                 bool log_probs_input) {
  MIXRT_ASSIGN_OR_RETURN(Tensor t, CheckTargets(logits, target, options));
  MIXRT_ASSIGN_OR_RETURN(
      Tensor per_sample,
      empty({logits.shape()[0]}, DType::kF32, logits.device()));
  if (logits.numel() > 0) {
    const MixrtCrossEntropyAttrs attrs = Attrs(options, log_probs_input);
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

absl::StatusOr<Tensor> ClassLossBackward(const Tensor& grad_loss,
                                         const Tensor& logits,
                                         const Tensor& target,
                                         const CrossEntropyOptions& options,
                                         bool log_probs_input) {
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
    const MixrtCrossEntropyAttrs attrs = Attrs(options, log_probs_input);
    const Tensor ins[] = {per_sample, logits, t};
    const Tensor outs[] = {grad};
    MIXRT_RETURN_IF_ERROR(
        LaunchKernel(MIXRT_OP_CROSS_ENTROPY_BACKWARD, ins, outs, &attrs));
  }
  return grad;
}

}  // namespace

absl::StatusOr<Tensor> cross_entropy(const Tensor& logits, const Tensor& target,
                                     const CrossEntropyOptions& options) {
  return ClassLoss(logits, target, options, /*log_probs_input=*/false);
}

absl::StatusOr<Tensor> cross_entropy_backward(
    const Tensor& grad_loss, const Tensor& logits, const Tensor& target,
    const CrossEntropyOptions& options) {
  return ClassLossBackward(grad_loss, logits, target, options, false);
}

absl::StatusOr<Tensor> nll_loss(const Tensor& log_probs, const Tensor& target,
                                const CrossEntropyOptions& options) {
  return ClassLoss(log_probs, target, options, /*log_probs_input=*/true);
}

absl::StatusOr<Tensor> nll_loss_backward(const Tensor& grad_loss,
                                         const Tensor& log_probs,
                                         const Tensor& target,
                                         const CrossEntropyOptions& options) {
  return ClassLossBackward(grad_loss, log_probs, target, options, true);
}

namespace {

// Applies the reduction to an elementwise loss.
absl::StatusOr<Tensor> Reduce(const Tensor& elementwise, Reduction reduction) {
  switch (reduction) {
    case Reduction::kNone:
      return elementwise;
    case Reduction::kSum:
      return sum(elementwise);
    case Reduction::kMean:
      return mean(elementwise);
  }
  return absl::InternalError("unknown reduction");
}

// d loss / d elementwise-loss, broadcast to `shape`: grad_loss itself for
// none, expanded for sum, divided by the element count for mean.
absl::StatusOr<Tensor> SpreadGrad(const Tensor& grad_loss, const Shape& shape,
                                  DType dtype, Reduction reduction,
                                  absl::string_view op) {
  MIXRT_RETURN_IF_ERROR(CheckFloating(grad_loss, op));
  MIXRT_ASSIGN_OR_RETURN(Tensor g, grad_loss.to(dtype));
  if (reduction == Reduction::kNone) {
    if (g.shape() != shape) {
      return absl::InvalidArgumentError(absl::StrCat(
          op, ": grad_loss must have the loss's shape ", ShapeToString(shape)));
    }
    return g;
  }
  if (g.numel() != 1) {
    return absl::InvalidArgumentError(
        absl::StrCat(op, ": grad_loss must be a scalar"));
  }
  MIXRT_ASSIGN_OR_RETURN(g, g.reshape({}));
  if (reduction == Reduction::kMean) {
    int64_t n = 1;
    for (int64_t s : shape) n *= s;
    MIXRT_ASSIGN_OR_RETURN(g, scale(g, 1.0 / std::max<int64_t>(n, 1)));
  }
  return g.expand(shape);
}

absl::StatusOr<Tensor> Difference(const Tensor& input, const Tensor& target,
                                  absl::string_view op) {
  MIXRT_RETURN_IF_ERROR(CheckFloating(input, op));
  MIXRT_RETURN_IF_ERROR(CheckFloating(target, op));
  return sub(input, target);
}

}  // namespace

absl::StatusOr<Tensor> mse_loss(const Tensor& input, const Tensor& target,
                                Reduction reduction) {
  MIXRT_ASSIGN_OR_RETURN(Tensor d, Difference(input, target, "mse_loss"));
  MIXRT_ASSIGN_OR_RETURN(Tensor sq, mul(d, d));
  return Reduce(sq, reduction);
}

absl::StatusOr<Tensor> mse_loss_backward(const Tensor& grad_loss,
                                         const Tensor& input,
                                         const Tensor& target,
                                         Reduction reduction) {
  MIXRT_ASSIGN_OR_RETURN(Tensor d,
                         Difference(input, target, "mse_loss_backward"));
  // 2 d g as d (2 g): doubling is exact, so the bits are (2 d) g's, and for
  // a reduced loss the factor lands on one scalar instead of a pass over d.
  MIXRT_ASSIGN_OR_RETURN(Tensor twice_grad, scale(grad_loss, 2.0));
  MIXRT_ASSIGN_OR_RETURN(Tensor g, SpreadGrad(twice_grad, d.shape(), d.dtype(),
                                              reduction, "mse_loss_backward"));
  return mul(d, g);
}

absl::StatusOr<Tensor> l1_loss(const Tensor& input, const Tensor& target,
                               Reduction reduction) {
  MIXRT_ASSIGN_OR_RETURN(Tensor d, Difference(input, target, "l1_loss"));
  MIXRT_ASSIGN_OR_RETURN(Tensor a, abs(d));
  return Reduce(a, reduction);
}

absl::StatusOr<Tensor> l1_loss_backward(const Tensor& grad_loss,
                                        const Tensor& input,
                                        const Tensor& target,
                                        Reduction reduction) {
  MIXRT_ASSIGN_OR_RETURN(Tensor d,
                         Difference(input, target, "l1_loss_backward"));
  MIXRT_ASSIGN_OR_RETURN(Tensor g, SpreadGrad(grad_loss, d.shape(), d.dtype(),
                                              reduction, "l1_loss_backward"));
  // sign(d) = |d|' (0 at 0, as PyTorch).
  return unary_backward(MIXRT_UNARY_ABS, g, d);
}

absl::StatusOr<Tensor> smooth_l1_loss(const Tensor& input, const Tensor& target,
                                      Reduction reduction, double beta) {
  if (!(beta > 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("smooth_l1_loss: beta must be > 0, got ", beta));
  }
  MIXRT_ASSIGN_OR_RETURN(Tensor d, Difference(input, target, "smooth_l1_loss"));
  MIXRT_ASSIGN_OR_RETURN(Tensor a, abs(d));
  MIXRT_ASSIGN_OR_RETURN(Tensor sq, mul(d, d));
  MIXRT_ASSIGN_OR_RETURN(Tensor quadratic, scale(sq, 0.5 / beta));
  MIXRT_ASSIGN_OR_RETURN(Tensor linear_part, scale(a, 1.0, -0.5 * beta));
  MIXRT_ASSIGN_OR_RETURN(Tensor b, full({}, beta, a.dtype(), a.device()));
  MIXRT_ASSIGN_OR_RETURN(Tensor small, lt(a, b));
  MIXRT_ASSIGN_OR_RETURN(Tensor loss, where(small, quadratic, linear_part));
  return Reduce(loss, reduction);
}

absl::StatusOr<Tensor> smooth_l1_loss_backward(const Tensor& grad_loss,
                                               const Tensor& input,
                                               const Tensor& target,
                                               Reduction reduction,
                                               double beta) {
  if (!(beta > 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("smooth_l1_loss_backward: beta must be > 0, got ", beta));
  }
  MIXRT_ASSIGN_OR_RETURN(Tensor d,
                         Difference(input, target, "smooth_l1_loss_backward"));
  MIXRT_ASSIGN_OR_RETURN(Tensor g,
                         SpreadGrad(grad_loss, d.shape(), d.dtype(), reduction,
                                    "smooth_l1_loss_backward"));
  // d/dd = clamp(d / beta, -1, 1).
  MIXRT_ASSIGN_OR_RETURN(Tensor scaled, scale(d, 1.0 / beta));
  MIXRT_ASSIGN_OR_RETURN(Tensor slope, clamp(scaled, -1.0, 1.0));
  return mul(slope, g);
}

absl::StatusOr<Tensor> binary_cross_entropy_with_logits(const Tensor& logits,
                                                        const Tensor& target,
                                                        Reduction reduction) {
  constexpr absl::string_view kOp = "binary_cross_entropy_with_logits";
  MIXRT_ASSIGN_OR_RETURN(Tensor xy, mul(logits, target));
  MIXRT_RETURN_IF_ERROR(CheckFloating(logits, kOp));
  MIXRT_ASSIGN_OR_RETURN(Tensor pos, relu(logits));
  MIXRT_ASSIGN_OR_RETURN(Tensor a, abs(logits));
  MIXRT_ASSIGN_OR_RETURN(Tensor e, scale(a, -1.0));
  MIXRT_ASSIGN_OR_RETURN(e, exp(e));
  MIXRT_ASSIGN_OR_RETURN(e, log1p(e));
  MIXRT_ASSIGN_OR_RETURN(Tensor loss, sub(pos, xy));
  MIXRT_ASSIGN_OR_RETURN(loss, add(loss, e));
  return Reduce(loss, reduction);
}

absl::StatusOr<Tensor> binary_cross_entropy_with_logits_backward(
    const Tensor& grad_loss, const Tensor& logits, const Tensor& target,
    Reduction reduction) {
  constexpr absl::string_view kOp = "binary_cross_entropy_with_logits_backward";
  MIXRT_RETURN_IF_ERROR(CheckFloating(logits, kOp));
  MIXRT_ASSIGN_OR_RETURN(Tensor s, sigmoid(logits));
  MIXRT_ASSIGN_OR_RETURN(Tensor d, sub(s, target));
  MIXRT_ASSIGN_OR_RETURN(
      Tensor g, SpreadGrad(grad_loss, d.shape(), d.dtype(), reduction, kOp));
  return mul(d, g);
}

}  // namespace mixrt::kernels
