// Options of the ops, shared by the differentiable mixrt:: ops and the
// mixrt::kernels they run. They live in namespace mixrt so that calls passing
// them find each layer's functions without ambiguity.
#ifndef MIXRT_CORE_KERNELS_OP_OPTIONS_H_
#define MIXRT_CORE_KERNELS_OP_OPTIONS_H_

#include <array>
#include <cstdint>
#include <optional>

#include "core/dtype.h"
#include "core/tensor/tensor.h"
#include "mixrt/plugin_api.h"

namespace mixrt {

struct MatmulOptions {
  MixrtActivation activation = MIXRT_ACTIVATION_NONE;
  // The result dtype: the inputs' dtype when unset, or f32 (f16/bf16 inputs
  // with f32 output, as tensor-core GEMMs offer).
  std::optional<DType> out_dtype;
};

struct Conv2dOptions {
  std::array<int32_t, 2> stride = {1, 1};
  std::array<int32_t, 2> padding = {0, 0};
  std::array<int32_t, 2> dilation = {1, 1};
  int32_t groups = 1;
  MixrtActivation activation = MIXRT_ACTIVATION_NONE;  // Fused epilogue.
};

struct Pool2dOptions {
  MixrtPoolKind kind = MIXRT_POOL_MAX;
  std::array<int32_t, 2> kernel = {2, 2};
  std::array<int32_t, 2> stride = {2, 2};
  std::array<int32_t, 2> padding = {0, 0};
};

enum class Reduction { kNone, kMean, kSum };

struct CrossEntropyOptions {
  int64_t ignore_index = -100;
  double label_smoothing = 0.0;
  Reduction reduction = Reduction::kMean;
  // Per-class weights [C] (torch's weight=), a constant of the loss; none:
  // every class 1. mixrt::cross_entropy only (not the kernels).
  Tensor weight;
};

}  // namespace mixrt

#endif  // MIXRT_CORE_KERNELS_OP_OPTIONS_H_
