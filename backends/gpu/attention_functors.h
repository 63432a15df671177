// Fused scaled dot-product attention for the GPU plugins: one thread per
// query row (forward, dQ) or key row (dK, dV), walking the other side with
// an online softmax in f32, so no L x S matrix exists (O(L Ev) scratch for
// the f32 accumulators). The per-element rules (causal, masks, dropout) are
// the SDK's attention_rules.h; what a hidden NaN or +inf score does (the
// row becomes NaN) is the reference plugin's definition. Simple rather than
// fast: every thread re-reads K and V (a warp's threads read the same row
// at once), which a tiled shared-memory kernel would not.
#ifndef MIXRT_BACKENDS_GPU_ATTENTION_FUNCTORS_H_
#define MIXRT_BACKENDS_GPU_ATTENTION_FUNCTORS_H_

#include <cmath>
#include <cstdint>

#include "backends/gpu/device_tensor.h"
#include "mixrt/host_device.h"
#include "plugins/sdk/attention_rules.h"

namespace mixrt::gpu {

// q [G, L, E], k [G, S, E], v [G, S, Ev] (contiguous), the mask's
// [G, L, S] element strides, and the attributes.
struct AttentionProblem {
  DeviceTensor q, k, v, mask;
  int64_t groups = 0, queries = 0, keys = 0, head_dim = 0, value_dim = 0;
  float scale = 1;
  bool is_causal = false;
  uint32_t mask_kind = MIXRT_ATTENTION_MASK_NONE;
  double dropout_p = 0;
  uint64_t seed = 0, offset = 0;

  // q_i . k_j * scale + bias, in f32: -inf where hidden, NaN where a hidden
  // score was NaN or +inf (as the definition, scores + bias, makes it).
  MIXRT_HOST_DEVICE float Score(int64_t g, int64_t i, int64_t j) const {
    const int64_t qa = (g * queries + i) * head_dim;
    const int64_t ka = (g * keys + j) * head_dim;
    float dot = 0;
    for (int64_t e = 0; e < head_dim; ++e) {
      dot += q.LoadFloat(qa + e) * k.LoadFloat(ka + e);
    }
    const float m =
        mask_kind == MIXRT_ATTENTION_MASK_NONE
            ? 0.0f
            : mask.LoadFloat(g * mask.strides[0] + i * mask.strides[1] +
                             j * mask.strides[2]);
    return dot * scale + static_cast<float>(sdk::AttentionBiasRule(
                             is_causal, mask_kind, m, i, j));
  }

  MIXRT_HOST_DEVICE float Dropout(int64_t g, int64_t i, int64_t j) const {
    return static_cast<float>(sdk::AttentionDropoutRule(
        dropout_p, seed, offset, queries, keys, g, i, j));
  }

  // Weight (g, i, j) from the row's log-normalizer: 0 when the row sees no
  // key (lse -inf), NaN when it is NaN.
  MIXRT_HOST_DEVICE float Weight(float score, float lse) const {
    if (lse == -INFINITY) return 0.0f;
    return expf(score - lse);
  }

  // dO_i . v_j.
  MIXRT_HOST_DEVICE float GradDotValue(const DeviceTensor& grad_out, int64_t g,
                                       int64_t i, int64_t j) const {
    const int64_t oa = (g * queries + i) * value_dim;
    const int64_t va = (g * keys + j) * value_dim;
    float dot = 0;
    for (int64_t c = 0; c < value_dim; ++c) {
      dot += grad_out.LoadFloat(oa + c) * v.LoadFloat(va + c);
    }
    return dot;
  }
};

// Forward, thread r = g L + i: out row r and lse[r]. acc: f32 [G, L, Ev].
struct AttentionForwardRows {
  AttentionProblem p;
  DeviceTensor out;  // [G, L, Ev]
  float* lse;        // f32 [G, L]
  float* acc;
  MIXRT_HOST_DEVICE void operator()(int64_t r) const {
    const int64_t g = r / p.queries, i = r % p.queries, ev = p.value_dim;
    float* a = acc + r * ev;
    for (int64_t c = 0; c < ev; ++c) a[c] = 0;
    float max = -INFINITY, total = 0;
    bool nan = false;
    for (int64_t j = 0; j < p.keys && !nan; ++j) {
      const float s = p.Score(g, i, j);
      if (s != s) nan = true;
      if (nan || s == -INFINITY) continue;
      if (s > max) {  // Rescale what the earlier keys summed.
        const float correction = expf(max - s);  // 0 for the first key.
        total *= correction;
        for (int64_t c = 0; c < ev; ++c) a[c] *= correction;
        max = s;
      }
      const float w = expf(s - max);  // NaN when s = max = +inf.
      total += w;
      const float kept = w * p.Dropout(g, i, j);
      if (kept == 0) continue;
      const int64_t va = (g * p.keys + j) * ev;
      for (int64_t c = 0; c < ev; ++c) a[c] += kept * p.v.LoadFloat(va + c);
    }
    const bool none = !nan && max == -INFINITY;  // Every key hidden.
    lse[r] = nan ? NAN : none ? -INFINITY : max + logf(total);
    for (int64_t c = 0; c < ev; ++c) {
      out.StoreFloat(r * ev + c, nan ? NAN : none ? 0.0f : a[c] / total);
    }
  }
};

// Backward, first: d[r] = dO_r . O_r, thread r = g L + i.
struct AttentionRowDots {
  DeviceTensor grad_out, out;  // [G, L, Ev]
  int64_t value_dim;
  float* d;  // f32 [G, L]
  MIXRT_HOST_DEVICE void operator()(int64_t r) const {
    float dot = 0;
    for (int64_t c = 0; c < value_dim; ++c) {
      dot += grad_out.LoadFloat(r * value_dim + c) *
             out.LoadFloat(r * value_dim + c);
    }
    d[r] = dot;
  }
};

// The gradient of score (g, i, j): dS = P (dP' - D_i) scale, where dP' is
// dO_i . v_j through the dropout factor.
struct AttentionScoreGrad {
  float weight;   // P_ij before dropout.
  float dropout;  // Its factor.
  float grad;     // dS_ij.
};

MIXRT_HOST_DEVICE inline AttentionScoreGrad ScoreGrad(
    const AttentionProblem& p, const DeviceTensor& grad_out, const float* lse,
    const float* d, int64_t g, int64_t i, int64_t j) {
  const int64_t r = g * p.queries + i;
  AttentionScoreGrad s;
  s.weight = p.Weight(p.Score(g, i, j), lse[r]);
  s.dropout = p.Dropout(g, i, j);
  const float dp =
      s.weight == 0 ? 0.0f : p.GradDotValue(grad_out, g, i, j) * s.dropout;
  s.grad = s.weight * (dp - d[r]) * p.scale;
  return s;
}

// Backward, dQ: thread r = g L + i. acc: f32 [G, L, E].
struct AttentionGradQRows {
  AttentionProblem p;
  DeviceTensor grad_out;  // [G, L, Ev]
  const float* lse;
  const float* d;
  DeviceTensor grad_q;  // [G, L, E]
  float* acc;
  MIXRT_HOST_DEVICE void operator()(int64_t r) const {
    const int64_t g = r / p.queries, i = r % p.queries, e = p.head_dim;
    float* a = acc + r * e;
    for (int64_t c = 0; c < e; ++c) a[c] = 0;
    for (int64_t j = 0; j < p.keys; ++j) {
      const float ds = ScoreGrad(p, grad_out, lse, d, g, i, j).grad;
      if (ds == 0) continue;
      const int64_t ka = (g * p.keys + j) * e;
      for (int64_t c = 0; c < e; ++c) a[c] += ds * p.k.LoadFloat(ka + c);
    }
    for (int64_t c = 0; c < e; ++c) grad_q.StoreFloat(r * e + c, a[c]);
  }
};

// Backward, dK and dV: thread t = g S + j. acc: f32 [G, S, E + Ev].
struct AttentionGradKVRows {
  AttentionProblem p;
  DeviceTensor grad_out;  // [G, L, Ev]
  const float* lse;
  const float* d;
  DeviceTensor grad_k, grad_v;  // [G, S, E], [G, S, Ev]
  float* acc;
  MIXRT_HOST_DEVICE void operator()(int64_t t) const {
    const int64_t g = t / p.keys, j = t % p.keys;
    const int64_t e = p.head_dim, ev = p.value_dim;
    float* dk = acc + t * (e + ev);
    float* dv = dk + e;
    for (int64_t c = 0; c < e + ev; ++c) dk[c] = 0;
    for (int64_t i = 0; i < p.queries; ++i) {
      const AttentionScoreGrad s = ScoreGrad(p, grad_out, lse, d, g, i, j);
      const float kept = s.weight * s.dropout;
      const int64_t r = g * p.queries + i;
      if (kept != 0) {
        for (int64_t c = 0; c < ev; ++c) {
          dv[c] += kept * grad_out.LoadFloat(r * ev + c);
        }
      }
      if (s.grad != 0) {
        for (int64_t c = 0; c < e; ++c)
          dk[c] += s.grad * p.q.LoadFloat(r * e + c);
      }
    }
    for (int64_t c = 0; c < e; ++c) grad_k.StoreFloat(t * e + c, dk[c]);
    for (int64_t c = 0; c < ev; ++c) grad_v.StoreFloat(t * ev + c, dv[c]);
  }
};

}  // namespace mixrt::gpu

#endif  // MIXRT_BACKENDS_GPU_ATTENTION_FUNCTORS_H_
