// layer_norm over the trailing `normalized_dims` dims, with statistics kept
// for the backward kernel.
#ifndef MIXRT_CORE_KERNELS_LAYER_NORM_H_
#define MIXRT_CORE_KERNELS_LAYER_NORM_H_

#include "absl/status/statusor.h"
#include "core/tensor/tensor.h"

namespace mixrt::kernels {

struct LayerNormOutput {
  Tensor y;     // x's shape and dtype.
  Tensor mean;  // f32, one per normalized row.
  Tensor rstd;  // f32, 1 / sqrt(var + eps).
};

// weight and bias (both or neither defined) have the normalized shape.
absl::StatusOr<LayerNormOutput> layer_norm(const Tensor& x, int normalized_dims,
                                           const Tensor& weight,
                                           const Tensor& bias,
                                           double eps = 1e-5);

struct LayerNormGrads {
  Tensor grad_x;
  Tensor grad_weight;  // Undefined when there is no weight.
  Tensor grad_bias;
};

absl::StatusOr<LayerNormGrads> layer_norm_backward(
    const Tensor& grad_y, const Tensor& x, const LayerNormOutput& forward,
    int normalized_dims, const Tensor& weight, double eps = 1e-5);

}  // namespace mixrt::kernels

#endif  // MIXRT_CORE_KERNELS_LAYER_NORM_H_
