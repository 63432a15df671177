// What follows the product in MIXRT_OP_MATMUL: out = act(acc + bias) +
// beta * out. The tiled GEMM applies it per element as it stores; the cuBLASLt
// path runs it as a separate pass when the library cannot express it (erf
// GELU, an activation together with beta != 0).
#ifndef MIXRT_BACKENDS_GPU_GEMM_EPILOGUE_H_
#define MIXRT_BACKENDS_GPU_GEMM_EPILOGUE_H_

#include <cstdint>

#include "backends/gpu/device_tensor.h"
#include "plugins/sdk/pointwise_math.h"

namespace mixrt::gpu {

MIXRT_HOST_DEVICE inline float ApplyActivation(uint32_t activation, float v) {
  switch (activation) {
    case MIXRT_ACTIVATION_RELU:
      return sdk::ApplyUnary<float>(MIXRT_UNARY_RELU, v, 0.0f, 0.0f);
    case MIXRT_ACTIVATION_GELU:
      return sdk::ApplyUnary<float>(MIXRT_UNARY_GELU, v, 0.0f, 0.0f);
    case MIXRT_ACTIVATION_GELU_TANH:
      return sdk::ApplyUnary<float>(MIXRT_UNARY_GELU_TANH, v, 0.0f, 0.0f);
    default:
      return v;
  }
}

struct GemmEpilogue {
  DeviceTensor bias;  // [N]; used when has_bias.
  bool has_bias = false;
  uint32_t activation = MIXRT_ACTIVATION_NONE;
  float beta = 0.0f;

  // The final value of out's element at `offset`, column `col`.
  MIXRT_HOST_DEVICE float Apply(const DeviceTensor& out, int64_t offset,
                                int64_t col, float acc) const {
    float v = acc;
    if (has_bias) v += bias.LoadFloat(bias.Offset(col));
    v = ApplyActivation(activation, v);
    if (beta != 0.0f) v += beta * out.LoadFloat(offset);
    return v;
  }
};

// The epilogue as its own pass over a product already in `product` (f32 or
// out's dtype; may be `out` itself when beta is 0).
struct GemmEpilogueFunctor {
  DeviceTensor out;
  DeviceTensor product;
  GemmEpilogue epilogue;
  int64_t n;  // Columns.
  MIXRT_HOST_DEVICE void operator()(int64_t i) const {
    const int64_t o = out.Offset(i);
    const float acc = product.LoadFloat(product.Offset(i));
    out.StoreFloat(o, epilogue.Apply(out, o, i % n, acc));
  }
};

}  // namespace mixrt::gpu

#endif  // MIXRT_BACKENDS_GPU_GEMM_EPILOGUE_H_
