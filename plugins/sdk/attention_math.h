// The per-element rules of MIXRT_OP_SCALED_DOT_PRODUCT_ATTENTION that every
// backend must apply identically (plugin_api.h specifies them;
// attention_rules.h holds them on plain values), applied to an
// AttentionCall: the bias of (g, i, j) and the dropout factor of its weight.
#ifndef MIXRT_PLUGINS_SDK_ATTENTION_MATH_H_
#define MIXRT_PLUGINS_SDK_ATTENTION_MATH_H_

#include <cmath>
#include <cstdint>

#include "plugins/sdk/attention_rules.h"
#include "plugins/sdk/call_decoders.h"

namespace mixrt::sdk {

inline double AttentionBias(const AttentionCall& a, int64_t g, int64_t i,
                            int64_t j) {
  const float m = a.mask == nullptr ? 0.0f
                                    : a.mask->LoadFloat(g * a.mask->stride(0) +
                                                        i * a.mask->stride(1) +
                                                        j * a.mask->stride(2));
  return AttentionBiasRule(a.attrs->is_causal != 0, a.attrs->mask_kind, m, i,
                           j);
}

inline double AttentionDropoutFactor(const AttentionCall& a, int64_t g,
                                     int64_t i, int64_t j) {
  return AttentionDropoutRule(a.attrs->dropout_p, a.attrs->seed,
                              a.attrs->offset, a.queries, a.keys, g, i, j);
}

// AttentionDropoutFactor of (g, i, j0 .. j0 + n) into factors[0 .. n),
// a Philox block per four consecutive weights.
inline void AttentionDropoutRow(const AttentionCall& a, int64_t g, int64_t i,
                                int64_t j0, int64_t n, float* factors) {
  const double p = a.attrs->dropout_p;
  if (p == 0) {
    for (int64_t j = 0; j < n; ++j) factors[j] = 1.0f;
    return;
  }
  const float kept = static_cast<float>(1.0 / (1.0 - p));
  const auto first = static_cast<uint64_t>((g * a.queries + i) * a.keys + j0);
  ForEachPhiloxUnit(
      a.attrs->seed, a.attrs->offset, first, n,
      [&](int64_t j, double unit) { factors[j] = unit < p ? 0.0f : kept; });
}

}  // namespace mixrt::sdk

#endif  // MIXRT_PLUGINS_SDK_ATTENTION_MATH_H_
