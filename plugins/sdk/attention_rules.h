// The per-element rules of MIXRT_OP_SCALED_DOT_PRODUCT_ATTENTION on plain
// values, for host and device code alike (GPU kernels cannot take the SDK's
// TensorRef-based AttentionCall): which keys a query sees, what the mask
// adds, and the dropout factor of each weight. attention_math.h applies them
// to an AttentionCall.
#ifndef MIXRT_PLUGINS_SDK_ATTENTION_RULES_H_
#define MIXRT_PLUGINS_SDK_ATTENTION_RULES_H_

#include <cstdint>

#include "mixrt/host_device.h"
#include "mixrt/plugin_api.h"
#include "plugins/sdk/philox.h"

namespace mixrt::sdk {

// The bias added to the scaled score of query i and key j: -inf where the
// key is hidden (causal, or a false bool mask), the additive mask's value,
// else 0. `mask_value` is the mask's element (i, j) when mask_kind is not
// NONE.
MIXRT_HOST_DEVICE inline double AttentionBiasRule(bool is_causal,
                                                  uint32_t mask_kind,
                                                  float mask_value, int64_t i,
                                                  int64_t j) {
  const double hidden = -__builtin_inf();
  if (is_causal && j > i) return hidden;
  if (mask_kind == MIXRT_ATTENTION_MASK_BOOL) {
    return mask_value != 0 ? 0.0 : hidden;
  }
  if (mask_kind == MIXRT_ATTENTION_MASK_ADDITIVE) return mask_value;
  return 0;
}

// What weight (g, i, j) of a [G, L, S] problem is multiplied by after the
// softmax: 1 without dropout; else 0 (dropped) or 1 / (1 - p), by the
// Philox stream (seed, offset) at element (g L + i) S + j.
MIXRT_HOST_DEVICE inline double AttentionDropoutRule(double p, uint64_t seed,
                                                     uint64_t offset,
                                                     int64_t queries,
                                                     int64_t keys, int64_t g,
                                                     int64_t i, int64_t j) {
  if (p == 0) return 1;
  const uint64_t index = static_cast<uint64_t>((g * queries + i) * keys + j);
  return PhiloxUniform(seed, offset, index, 0, 1) < p ? 0.0 : 1.0 / (1.0 - p);
}

}  // namespace mixrt::sdk

#endif  // MIXRT_PLUGINS_SDK_ATTENTION_RULES_H_
