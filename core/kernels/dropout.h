// Dropout from the counter-based generator: the mask for a seed is the same
// on every backend, and backward reuses it exactly.
#ifndef MIXRT_CORE_KERNELS_DROPOUT_H_
#define MIXRT_CORE_KERNELS_DROPOUT_H_

#include "absl/status/statusor.h"
#include "core/tensor/generator.h"
#include "core/tensor/tensor.h"

namespace mixrt::kernels {

struct DropoutOutput {
  Tensor y;
  Tensor scale;  // x's dtype: 0 where dropped, 1 / (1 - p) where kept.
};

// Training-mode dropout with probability p in [0, 1).
absl::StatusOr<DropoutOutput> dropout(const Tensor& x, double p,
                                      Generator* generator = nullptr);
// grad_x = grad_y * scale.
absl::StatusOr<Tensor> dropout_backward(const Tensor& grad_y,
                                        const Tensor& scale);

}  // namespace mixrt::kernels

#endif  // MIXRT_CORE_KERNELS_DROPOUT_H_
