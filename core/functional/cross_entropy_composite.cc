// cross_entropy beyond what the fused kernel takes (class indices of [N, C]
// logits, no class weights), composed of differentiable ops as PyTorch's
// cross_entropy_loss_* do: [N, C, d...] inputs (classes moved last, rows
// flattened), class weights with ignore_index and label smoothing, and
// class-probability targets. The formulas and normalizations are
// PyTorch's (aten/src/ATen/native/LossNLL.cpp), term for term.
#include "core/functional/cross_entropy_composite.h"

#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "core/functional/ops.h"
#include "core/kernels/pointwise.h"
#include "core/kernels/reduce.h"
#include "core/tensor/factories.h"
#include "mixrt/status_macros.h"

namespace mixrt::internal {
namespace {

absl::Status CheckWeight(const Tensor& weight, int64_t classes) {
  if (!weight.defined()) return absl::OkStatus();
  if (weight.ndim() != 1 || weight.shape()[0] != classes ||
      !IsFloating(weight.dtype())) {
    return absl::InvalidArgumentError(absl::StrCat(
        "cross_entropy: weight is ", DTypeName(weight.dtype()),
        ShapeToString(weight.shape()), "; expected a floating tensor of ",
        classes, " class weights"));
  }
  return absl::OkStatus();
}

// The class weights as [1, C] in `dtype`, detached (a constant here).
absl::StatusOr<Tensor> WeightRow(const Tensor& weight, int64_t classes,
                                 DType dtype, const Device& device) {
  if (!weight.defined()) return ones({1, classes}, dtype, device);
  MIXRT_ASSIGN_OR_RETURN(Tensor w, weight.detach().to(dtype));
  return w.reshape({1, classes});
}

// Every target index is a class or ignore_index (a host read: this path
// is not the fused one, and a wrong index must be an error, not garbage).
absl::Status CheckTargets(const Tensor& target, int64_t classes,
                          int64_t ignore_index) {
  MIXRT_ASSIGN_OR_RETURN(const std::vector<int64_t> indices,
                         target.to_int_vector());
  for (int64_t t : indices) {
    if (t != ignore_index && (t < 0 || t >= classes)) {
      return absl::InvalidArgumentError(
          absl::StrCat("cross_entropy: target ", t, " is out of bounds for ",
                       classes, " classes (ignore_index ", ignore_index, ")"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<Tensor> Reduced(const Tensor& per_row, Reduction reduction) {
  switch (reduction) {
    case Reduction::kNone:
      return per_row;
    case Reduction::kSum:
      return sum(per_row);
    case Reduction::kMean:
      return mean(per_row);
  }
  return absl::InternalError("unknown reduction");
}

// [N, C] logits, [N] class indices, with weights: PyTorch's nll_loss_nd
// plus its label-smoothing term, each normalized as PyTorch normalizes it.
absl::StatusOr<Tensor> WeightedClassTargets(const Tensor& logits,
                                            const Tensor& target,
                                            const CrossEntropyOptions& o) {
  const int64_t n = logits.shape()[0], classes = logits.shape()[1];
  if (target.ndim() != 1 || target.shape()[0] != n) {
    return absl::InvalidArgumentError(
        absl::StrCat("cross_entropy: target ", ShapeToString(target.shape()),
                     " does not match input ", ShapeToString(logits.shape()),
                     "; expected [", n, "] class indices"));
  }
  MIXRT_RETURN_IF_ERROR(CheckTargets(target, classes, o.ignore_index));
  MIXRT_ASSIGN_OR_RETURN(Tensor logp, log_softmax(logits, 1));
  const DType dtype = logp.dtype();
  const Device device = logp.device();
  // One-hot rows of the targets (an ignored index matches no class unless
  // it is one; `valid` zeroes those rows either way).
  MIXRT_ASSIGN_OR_RETURN(
      Tensor classes_row,
      arange(0, static_cast<double>(classes), 1, target.dtype(), device));
  MIXRT_ASSIGN_OR_RETURN(classes_row, classes_row.reshape({1, classes}));
  MIXRT_ASSIGN_OR_RETURN(Tensor column, target.reshape({n, 1}));
  MIXRT_ASSIGN_OR_RETURN(Tensor hits, kernels::eq(column, classes_row));
  MIXRT_ASSIGN_OR_RETURN(Tensor one_hot, hits.to(dtype));
  MIXRT_ASSIGN_OR_RETURN(
      Tensor ignore,
      full({}, static_cast<double>(o.ignore_index), target.dtype(), device));
  MIXRT_ASSIGN_OR_RETURN(Tensor kept, kernels::ne(target, ignore));
  MIXRT_ASSIGN_OR_RETURN(Tensor valid, kept.to(dtype));
  MIXRT_ASSIGN_OR_RETURN(Tensor w, WeightRow(o.weight, classes, dtype, device));
  // w[y_i] for the rows that count, 0 for the ignored.
  MIXRT_ASSIGN_OR_RETURN(Tensor picked_w, kernels::mul(one_hot, w));
  MIXRT_ASSIGN_OR_RETURN(Tensor row_w, kernels::sum(picked_w, {1}));
  MIXRT_ASSIGN_OR_RETURN(row_w, kernels::mul(row_w, valid));
  // nll_i = -w[y_i] logp[i, y_i].
  MIXRT_ASSIGN_OR_RETURN(Tensor picked, mul(logp, one_hot));
  MIXRT_ASSIGN_OR_RETURN(Tensor logp_y, sum(picked, {1}));
  MIXRT_ASSIGN_OR_RETURN(Tensor weighted, mul(logp_y, row_w));
  MIXRT_ASSIGN_OR_RETURN(Tensor nll, neg(weighted));
  Tensor smooth;
  if (o.label_smoothing > 0) {
    // smooth_i = -sum_c w_c logp[i, c], 0 for an ignored row.
    MIXRT_ASSIGN_OR_RETURN(Tensor all_w, mul(logp, w));
    MIXRT_ASSIGN_OR_RETURN(Tensor row, sum(all_w, {1}));
    MIXRT_ASSIGN_OR_RETURN(row, mul(row, valid));
    MIXRT_ASSIGN_OR_RETURN(smooth, neg(row));
  }
  const double keep = 1 - o.label_smoothing;
  const double spread = o.label_smoothing / static_cast<double>(classes);
  if (o.reduction == Reduction::kMean) {
    // Both terms over the weights of the rows that count.
    MIXRT_ASSIGN_OR_RETURN(Tensor total_w, kernels::sum(row_w));
    MIXRT_ASSIGN_OR_RETURN(Tensor nll_sum, sum(nll));
    MIXRT_ASSIGN_OR_RETURN(Tensor loss, div(nll_sum, total_w));
    if (!smooth.defined()) return loss;
    MIXRT_ASSIGN_OR_RETURN(loss, scale(loss, keep));
    MIXRT_ASSIGN_OR_RETURN(Tensor smooth_sum, sum(smooth));
    MIXRT_ASSIGN_OR_RETURN(Tensor smooth_mean, div(smooth_sum, total_w));
    MIXRT_ASSIGN_OR_RETURN(smooth_mean, scale(smooth_mean, spread));
    return add(loss, smooth_mean);
  }
  MIXRT_ASSIGN_OR_RETURN(Tensor nll_r, Reduced(nll, o.reduction));
  if (!smooth.defined()) return nll_r;
  MIXRT_ASSIGN_OR_RETURN(nll_r, scale(nll_r, keep));
  MIXRT_ASSIGN_OR_RETURN(Tensor smooth_r, Reduced(smooth, o.reduction));
  MIXRT_ASSIGN_OR_RETURN(smooth_r, scale(smooth_r, spread));
  return add(nll_r, smooth_r);
}

// [N, C] logits, [N, C] class probabilities: -sum_c w_c t_ic logp_ic per
// row, the mean over rows (not weights), as PyTorch's prob-target loss.
absl::StatusOr<Tensor> ProbabilityTargets(const Tensor& logits,
                                          const Tensor& target_in,
                                          const CrossEntropyOptions& o) {
  if (target_in.shape() != logits.shape()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "cross_entropy: probability target ", ShapeToString(target_in.shape()),
        " does not match input ", ShapeToString(logits.shape())));
  }
  const int64_t classes = logits.shape()[1];
  MIXRT_ASSIGN_OR_RETURN(Tensor logp, log_softmax(logits, 1));
  MIXRT_ASSIGN_OR_RETURN(Tensor target, target_in.to(logp.dtype()));
  if (o.label_smoothing > 0) {
    MIXRT_ASSIGN_OR_RETURN(
        target, scale(target, 1 - o.label_smoothing,
                      o.label_smoothing / static_cast<double>(classes)));
  }
  if (o.weight.defined()) {
    MIXRT_ASSIGN_OR_RETURN(
        Tensor w, WeightRow(o.weight, classes, logp.dtype(), logp.device()));
    MIXRT_ASSIGN_OR_RETURN(logp, mul(logp, w));
  }
  MIXRT_ASSIGN_OR_RETURN(Tensor terms, mul(logp, target));
  MIXRT_ASSIGN_OR_RETURN(Tensor rows, sum(terms, {1}));
  MIXRT_ASSIGN_OR_RETURN(rows, neg(rows));
  return Reduced(rows, o.reduction);
}

// [N, C, d...] to [N * d..., C] (and the target alike): the loss of every
// position as a row.
absl::StatusOr<Tensor> ClassesLast(const Tensor& x) {
  std::vector<int64_t> order = {0};
  for (int64_t d = 2; d < x.ndim(); ++d) order.push_back(d);
  order.push_back(1);
  MIXRT_ASSIGN_OR_RETURN(Tensor moved, permute(x, order));
  return reshape(moved, {-1, x.shape()[1]});
}

}  // namespace

bool NeedsCompositeCrossEntropy(const Tensor& logits, const Tensor& target,
                                const CrossEntropyOptions& options) {
  return logits.ndim() > 2 || options.weight.defined() ||
         (target.defined() && IsFloating(target.dtype()));
}

absl::StatusOr<Tensor> CompositeCrossEntropy(
    const Tensor& logits, const Tensor& target,
    const CrossEntropyOptions& options) {
  if (logits.ndim() < 2) {
    return absl::InvalidArgumentError(absl::StrCat(
        "cross_entropy: input ", ShapeToString(logits.shape()),
        " with these options needs [N, C] or [N, C, d...] logits"));
  }
  const bool probabilities = IsFloating(target.dtype());
  MIXRT_RETURN_IF_ERROR(CheckWeight(options.weight, logits.shape()[1]));
  if (logits.ndim() == 2) {
    return probabilities ? ProbabilityTargets(logits, target, options)
                         : WeightedClassTargets(logits, target, options);
  }
  // Positions become rows; `none` gives the loss back in [N, d...].
  std::vector<int64_t> positions = {logits.shape()[0]};
  for (int64_t d = 2; d < logits.ndim(); ++d) {
    positions.push_back(logits.shape()[d]);
  }
  MIXRT_ASSIGN_OR_RETURN(Tensor rows, ClassesLast(logits));
  Tensor target_rows;
  if (probabilities) {
    if (target.shape() != logits.shape()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "cross_entropy: probability target ", ShapeToString(target.shape()),
          " does not match input ", ShapeToString(logits.shape())));
    }
    MIXRT_ASSIGN_OR_RETURN(target_rows, ClassesLast(target));
  } else {
    if (target.shape() != Shape(positions.begin(), positions.end())) {
      return absl::InvalidArgumentError(absl::StrCat(
          "cross_entropy: target ", ShapeToString(target.shape()),
          " does not match input ", ShapeToString(logits.shape()),
          "; expected ", ShapeToString(positions), " class indices"));
    }
    MIXRT_ASSIGN_OR_RETURN(target_rows, target.reshape({-1}));
  }
  MIXRT_ASSIGN_OR_RETURN(Tensor loss,
                         cross_entropy(rows, target_rows, options));
  if (options.reduction != Reduction::kNone) return loss;
  return reshape(loss, positions);
}

}  // namespace mixrt::internal
