// Losses with PyTorch's reductions.
#ifndef MIXRT_CORE_OPS_LOSS_H_
#define MIXRT_CORE_OPS_LOSS_H_

#include "absl/status/statusor.h"
#include "core/tensor/tensor.h"

namespace mixrt {

enum class Reduction { kNone, kMean, kSum };

struct CrossEntropyOptions {
  int64_t ignore_index = -100;
  double label_smoothing = 0.0;
  Reduction reduction = Reduction::kMean;
};

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

// mean((a - b)^2) (or sum, or elementwise).
absl::StatusOr<Tensor> mse_loss(const Tensor& a, const Tensor& b,
                                Reduction reduction = Reduction::kMean);

}  // namespace mixrt

#endif  // MIXRT_CORE_OPS_LOSS_H_
