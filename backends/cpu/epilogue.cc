#include "backends/cpu/epilogue.h"

#include <algorithm>

#include "backends/cpu/float_rows.h"
#include "backends/cpu/parallel.h"
#include "plugins/sdk/pointwise_math.h"

namespace mixrt::cpu {

float Activate(MixrtActivation act, float v) {
  switch (act) {
    case MIXRT_ACTIVATION_RELU:
      return sdk::ApplyUnary<float>(MIXRT_UNARY_RELU, v, 0, 0);
    case MIXRT_ACTIVATION_GELU:
      return sdk::ApplyUnary<float>(MIXRT_UNARY_GELU, v, 0, 0);
    case MIXRT_ACTIVATION_GELU_TANH:
      return sdk::ApplyUnary<float>(MIXRT_UNARY_GELU_TANH, v, 0, 0);
    default:
      return v;
  }
}

void ActivateInPlace(const sdk::TensorRef& t, MixrtActivation act) {
  if (act == MIXRT_ACTIVATION_NONE) return;
  constexpr int64_t kChunk = 1024;
  ParallelFor(t.numel(), 1 << 15, [&](int64_t begin, int64_t end) {
    float buffer[kChunk];
    for (int64_t b = begin; b < end; b += kChunk) {
      const int64_t n = std::min(kChunk, end - b);
      LoadRow(t.data(), t.dtype(), b, n, buffer);
      for (int64_t i = 0; i < n; ++i) buffer[i] = Activate(act, buffer[i]);
      StoreRow(buffer, n, t.data(), t.dtype(), b);
    }
  });
}

}  // namespace mixrt::cpu
