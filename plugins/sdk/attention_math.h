// The per-element rules of MIXRT_OP_SCALED_DOT_PRODUCT_ATTENTION that every
// backend must apply identically (plugin_api.h specifies them): which keys a
// query sees, the mask's bias, and the dropout factor of each weight.
#ifndef MIXRT_PLUGINS_SDK_ATTENTION_MATH_H_
#define MIXRT_PLUGINS_SDK_ATTENTION_MATH_H_

#include <cmath>
#include <cstdint>

#include "plugins/sdk/call_decoders.h"
#include "plugins/sdk/philox.h"

namespace mixrt::sdk {

// The bias added to the scaled score of (g, i, j): 0, -inf where the key is
// hidden (causal or a false bool mask), or the additive mask's value.
inline double AttentionBias(const AttentionCall& a, int64_t g, int64_t i,
                            int64_t j) {
  if (a.attrs->is_causal && j > i) return -INFINITY;
  if (a.mask == nullptr) return 0;
  const float m = a.mask->LoadFloat(g * a.mask->stride(0) +
                                    i * a.mask->stride(1) +
                                    j * a.mask->stride(2));
  if (a.attrs->mask_kind == MIXRT_ATTENTION_MASK_BOOL) {
    return m != 0 ? 0.0 : -INFINITY;
  }
  return m;
}

// What weight (g, i, j) is multiplied by after the softmax: 1 without
// dropout; else 0 (dropped) or 1 / (1 - p).
inline double AttentionDropoutFactor(const AttentionCall& a, int64_t g,
                                     int64_t i, int64_t j) {
  const double p = a.attrs->dropout_p;
  if (p == 0) return 1;
  const uint64_t index = static_cast<uint64_t>((g * a.queries + i) * a.keys + j);
  return PhiloxUniform(a.attrs->seed, a.attrs->offset, index, 0, 1) < p
             ? 0.0
             : 1.0 / (1.0 - p);
}

}  // namespace mixrt::sdk

#endif  // MIXRT_PLUGINS_SDK_ATTENTION_MATH_H_
