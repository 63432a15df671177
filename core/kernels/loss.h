// Losses with PyTorch's reductions.
#ifndef MIXRT_CORE_KERNELS_LOSS_H_
#define MIXRT_CORE_KERNELS_LOSS_H_

#include "absl/status/statusor.h"
#include "core/kernels/op_options.h"
#include "core/tensor/tensor.h"

namespace mixrt::kernels {

// logits [N, C], target [N] class indices (i64, or i32 converted). The loss
// is f32 whatever the logits' dtype. Mean divides by the number of targets
// that are not ignore_index, as PyTorch does.
absl::StatusOr<Tensor> cross_entropy(const Tensor& logits, const Tensor& target,
                                     const CrossEntropyOptions& options = {});
// d loss / d logits for the same arguments, given d output / d loss (a
// scalar for mean/sum, [N] for none).
absl::StatusOr<Tensor> cross_entropy_backward(
    const Tensor& grad_loss, const Tensor& logits, const Tensor& target,
    const CrossEntropyOptions& options = {});

// nll_loss: like cross_entropy on log-probabilities (no log_softmax).
absl::StatusOr<Tensor> nll_loss(const Tensor& log_probs, const Tensor& target,
                                const CrossEntropyOptions& options = {});
absl::StatusOr<Tensor> nll_loss_backward(
    const Tensor& grad_loss, const Tensor& log_probs, const Tensor& target,
    const CrossEntropyOptions& options = {});

// Regression losses of input against target (same shape after
// broadcasting), and their gradients with respect to the input given
// d output / d loss. The gradient with respect to the target is the
// negation for mse, l1 and smooth_l1.
absl::StatusOr<Tensor> mse_loss(const Tensor& input, const Tensor& target,
                                Reduction reduction = Reduction::kMean);
absl::StatusOr<Tensor> mse_loss_backward(
    const Tensor& grad_loss, const Tensor& input, const Tensor& target,
    Reduction reduction = Reduction::kMean);
absl::StatusOr<Tensor> l1_loss(const Tensor& input, const Tensor& target,
                               Reduction reduction = Reduction::kMean);
absl::StatusOr<Tensor> l1_loss_backward(const Tensor& grad_loss,
                                        const Tensor& input,
                                        const Tensor& target,
                                        Reduction reduction = Reduction::kMean);
// 0.5 d^2 / beta where |d| < beta, else |d| - 0.5 beta.
absl::StatusOr<Tensor> smooth_l1_loss(const Tensor& input, const Tensor& target,
                                      Reduction reduction = Reduction::kMean,
                                      double beta = 1.0);
absl::StatusOr<Tensor> smooth_l1_loss_backward(
    const Tensor& grad_loss, const Tensor& input, const Tensor& target,
    Reduction reduction = Reduction::kMean, double beta = 1.0);
// The numerically stable form max(x, 0) - x y + log(1 + exp(-|x|)).
absl::StatusOr<Tensor> binary_cross_entropy_with_logits(
    const Tensor& logits, const Tensor& target,
    Reduction reduction = Reduction::kMean);
absl::StatusOr<Tensor> binary_cross_entropy_with_logits_backward(
    const Tensor& grad_loss, const Tensor& logits, const Tensor& target,
    Reduction reduction = Reduction::kMean);

}  // namespace mixrt::kernels

#endif  // MIXRT_CORE_KERNELS_LOSS_H_
