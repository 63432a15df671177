// Batch normalization over every dim but 1 (BatchNorm1d/2d semantics).
#ifndef MIXRT_CORE_KERNELS_BATCH_NORM_H_
#define MIXRT_CORE_KERNELS_BATCH_NORM_H_

#include "absl/status/statusor.h"
#include "core/tensor/tensor.h"

namespace mixrt::kernels {

struct BatchNormOutput {
  Tensor y;
  Tensor save_mean;    // f32 [C]: what backward needs.
  Tensor save_invstd;  // f32 [C]
};

// weight, bias: [C] (undefined means 1 and 0). running_mean/var: f32 [C],
// updated in place when training. momentum as PyTorch (0.1 default).
absl::StatusOr<BatchNormOutput> batch_norm(
    const Tensor& x, const Tensor& weight, const Tensor& bias,
    const Tensor& running_mean, const Tensor& running_var, bool training,
    double momentum = 0.1, double eps = 1e-5);

struct BatchNormGrads {
  Tensor grad_x, grad_weight, grad_bias;
};

absl::StatusOr<BatchNormGrads> batch_norm_backward(
    const Tensor& grad_y, const Tensor& x, const Tensor& weight,
    const BatchNormOutput& forward, bool training, double eps = 1e-5);

}  // namespace mixrt::kernels

#endif  // MIXRT_CORE_KERNELS_BATCH_NORM_H_
