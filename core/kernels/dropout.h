// Dropout from the counter-based generator: the mask for a seed is the same
// on every backend, and backward reuses it exactly. A plugin with the fused
// op (ABI 1.1) regenerates the mask in backward from (seed, offset); for
// one without it the host composes random, compare, where and mul, and
// keeps the scaled mask.
#ifndef MIXRT_CORE_KERNELS_DROPOUT_H_
#define MIXRT_CORE_KERNELS_DROPOUT_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "core/tensor/generator.h"
#include "core/tensor/tensor.h"

namespace mixrt::kernels {

// What the backward needs: the stream, and the scaled mask when the plugin
// has no fused op (x's dtype: 0 where dropped, 1 / (1 - p) where kept).
struct DropoutState {
  double p = 0;
  uint64_t seed = 0, offset = 0;
  Tensor scale;  // Undefined when the fused op ran.
};

struct DropoutOutput {
  Tensor y;
  DropoutState state;
};

// Training-mode dropout with probability p in [0, 1): element i (row-major)
// is dropped where U(i) < p, U the generator's uniform stream.
absl::StatusOr<DropoutOutput> dropout(const Tensor& x, double p,
                                      Generator* generator = nullptr);
// grad_x = grad_y * (the forward's mask) / (1 - p).
absl::StatusOr<Tensor> dropout_backward(const Tensor& grad_y,
                                        const DropoutState& state);

}  // namespace mixrt::kernels

#endif  // MIXRT_CORE_KERNELS_DROPOUT_H_
