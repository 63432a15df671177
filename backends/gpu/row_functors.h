// Row-wise ops (softmax, log_softmax, layer_norm, cross_entropy, their
// gradients, and the reductions of MIXRT_OP_REDUCE) as functors that split
// each row across `lanes` cooperating threads.
//
// Protocol, shared by the device kernel (row_kernels.cuh: one block per row,
// lanes = threads of the block) and the host tests (which run lanes = 1 and
// lanes > 1 and fold the partials in lane order):
//   for pass in [0, kPasses):
//     acc[pass] = Combine over lanes of Partial(pass, row, lane, lanes, acc)
//   Write(row, lane, lanes, acc)   // every lane, after the last pass
// Partials see the combined results of the earlier passes. Accumulation is
// f32; Combine is associative up to rounding, so the f32 error grows with
// the per-lane length, not the row length.
#ifndef MIXRT_BACKENDS_GPU_ROW_FUNCTORS_H_
#define MIXRT_BACKENDS_GPU_ROW_FUNCTORS_H_

#include <cmath>
#include <cstdint>

#include "backends/gpu/device_tensor.h"
#include "mixrt/host_device.h"

namespace mixrt::gpu {

struct RowAcc {
  float v[3];
};

MIXRT_HOST_DEVICE inline RowAcc MakeAcc(float a, float b = 0.0f,
                                        float c = 0.0f) {
  RowAcc r;
  r.v[0] = a;
  r.v[1] = b;
  r.v[2] = c;
  return r;
}

// max that propagates NaN (x != x), as the reference's std::max chain does
// once a NaN reaches the running maximum.
MIXRT_HOST_DEVICE inline float NanMax(float a, float b) {
  if (a != a || b != b) return a + b;
  return a > b ? a : b;
}

MIXRT_HOST_DEVICE inline float NanMin(float a, float b) {
  if (a != a || b != b) return a + b;
  return a < b ? a : b;
}

// Chan et al.'s parallel combination of (count, mean, M2) triples.
MIXRT_HOST_DEVICE inline RowAcc WelfordCombine(const RowAcc& a,
                                               const RowAcc& b) {
  const float n = a.v[0] + b.v[0];
  if (n == 0.0f) return a;
  const float delta = b.v[1] - a.v[1];
  const float mean = a.v[1] + delta * (b.v[0] / n);
  const float m2 = a.v[2] + b.v[2] + delta * delta * (a.v[0] * b.v[0] / n);
  return MakeAcc(n, mean, m2);
}

MIXRT_HOST_DEVICE inline RowAcc WelfordAdd(const RowAcc& a, float x) {
  return WelfordCombine(a, MakeAcc(1.0f, x, 0.0f));
}

// Element c of row `row` when the op runs along `axis` of a tensor: rows are
// all the other indices in row-major order.
struct AxisRows {
  int64_t extent = 1;  // Length along the axis.
  int64_t inner = 1;   // Product of the dims after the axis.
  MIXRT_HOST_DEVICE int64_t Linear(int64_t row, int64_t c) const {
    return ((row / inner) * extent + c) * inner + row % inner;
  }
};

// softmax / log_softmax. Pass 0: max; pass 1: sum of exp(x - max).
struct SoftmaxRows {
  static constexpr int kPasses = 2;
  DeviceTensor out;
  DeviceTensor x;
  AxisRows rows;
  bool log;

  MIXRT_HOST_DEVICE RowAcc Identity(int pass) const {
    return MakeAcc(pass == 0 ? -INFINITY : 0.0f);
  }
  MIXRT_HOST_DEVICE RowAcc Partial(int pass, int64_t row, int lane, int lanes,
                                   const RowAcc* acc) const {
    RowAcc r = Identity(pass);
    for (int64_t c = lane; c < rows.extent; c += lanes) {
      const float v = x.LoadFloat(x.Offset(rows.Linear(row, c)));
      r.v[0] = pass == 0 ? NanMax(r.v[0], v) : r.v[0] + expf(v - acc[0].v[0]);
    }
    return r;
  }
  MIXRT_HOST_DEVICE RowAcc Combine(int pass, const RowAcc& a,
                                   const RowAcc& b) const {
    return MakeAcc(pass == 0 ? NanMax(a.v[0], b.v[0]) : a.v[0] + b.v[0]);
  }
  MIXRT_HOST_DEVICE void Write(int64_t row, int lane, int lanes,
                               const RowAcc* acc) const {
    const float max = acc[0].v[0];
    const float sum = acc[1].v[0];
    const float log_sum = logf(sum);
    for (int64_t c = lane; c < rows.extent; c += lanes) {
      const int64_t i = rows.Linear(row, c);
      const float v = x.LoadFloat(x.Offset(i));
      out.StoreFloat(out.Offset(i),
                     log ? v - max - log_sum : expf(v - max) / sum);
    }
  }
};

// grad_in = y (g - sum(g y)) for softmax; g - exp(y) sum(g) for log_softmax.
struct SoftmaxBackwardRows {
  static constexpr int kPasses = 1;
  DeviceTensor grad_in;
  DeviceTensor grad_out;
  DeviceTensor y;
  AxisRows rows;
  bool log;

  MIXRT_HOST_DEVICE RowAcc Identity(int) const { return MakeAcc(0.0f); }
  MIXRT_HOST_DEVICE RowAcc Partial(int, int64_t row, int lane, int lanes,
                                   const RowAcc*) const {
    float dot = 0.0f;
    for (int64_t c = lane; c < rows.extent; c += lanes) {
      const int64_t i = rows.Linear(row, c);
      const float g = grad_out.LoadFloat(grad_out.Offset(i));
      dot += log ? g : g * y.LoadFloat(y.Offset(i));
    }
    return MakeAcc(dot);
  }
  MIXRT_HOST_DEVICE RowAcc Combine(int, const RowAcc& a,
                                   const RowAcc& b) const {
    return MakeAcc(a.v[0] + b.v[0]);
  }
  MIXRT_HOST_DEVICE void Write(int64_t row, int lane, int lanes,
                               const RowAcc* acc) const {
    const float dot = acc[0].v[0];
    for (int64_t c = lane; c < rows.extent; c += lanes) {
      const int64_t i = rows.Linear(row, c);
      const float g = grad_out.LoadFloat(grad_out.Offset(i));
      const float yi = y.LoadFloat(y.Offset(i));
      grad_in.StoreFloat(grad_in.Offset(i),
                         log ? g - expf(yi) * dot : yi * (g - dot));
    }
  }
};

// layer_norm over rows of x [R, N]: Welford statistics, biased variance.
struct LayerNormRows {
  static constexpr int kPasses = 1;
  DeviceTensor y;
  DeviceTensor mean;  // [R] f32
  DeviceTensor rstd;  // [R] f32
  DeviceTensor x;
  DeviceTensor weight;  // Unused unless affine.
  DeviceTensor bias;
  int64_t n;
  float eps;
  bool affine;

  MIXRT_HOST_DEVICE RowAcc Identity(int) const { return MakeAcc(0.0f); }
  MIXRT_HOST_DEVICE RowAcc Partial(int, int64_t row, int lane, int lanes,
                                   const RowAcc*) const {
    RowAcc r = Identity(0);
    for (int64_t c = lane; c < n; c += lanes) {
      r = WelfordAdd(r, x.LoadFloat(x.Offset(row * n + c)));
    }
    return r;
  }
  MIXRT_HOST_DEVICE RowAcc Combine(int, const RowAcc& a,
                                   const RowAcc& b) const {
    return WelfordCombine(a, b);
  }
  MIXRT_HOST_DEVICE void Write(int64_t row, int lane, int lanes,
                               const RowAcc* acc) const {
    const float mu = acc[0].v[1];
    const float rs = 1.0f / sqrtf(acc[0].v[2] / static_cast<float>(n) + eps);
    if (lane == 0) {
      mean.StoreFloat(mean.Offset(row), mu);
      rstd.StoreFloat(rstd.Offset(row), rs);
    }
    for (int64_t c = lane; c < n; c += lanes) {
      const int64_t i = row * n + c;
      float v = (x.LoadFloat(x.Offset(i)) - mu) * rs;
      if (affine) {
        v = v * weight.LoadFloat(weight.Offset(c)) +
            bias.LoadFloat(bias.Offset(c));
      }
      y.StoreFloat(y.Offset(i), v);
    }
  }
};

// grad_x of layer_norm: rstd (dyw - mean(dyw) - xhat mean(dyw xhat)).
struct LayerNormBackwardRows {
  static constexpr int kPasses = 1;
  DeviceTensor grad_x;
  DeviceTensor grad_y;
  DeviceTensor x;
  DeviceTensor mean;
  DeviceTensor rstd;
  DeviceTensor weight;
  int64_t n;
  bool affine;

  MIXRT_HOST_DEVICE float Dyw(int64_t row, int64_t c) const {
    const float g = grad_y.LoadFloat(grad_y.Offset(row * n + c));
    return affine ? g * weight.LoadFloat(weight.Offset(c)) : g;
  }
  MIXRT_HOST_DEVICE float Xhat(int64_t row, int64_t c, float mu,
                               float rs) const {
    return (x.LoadFloat(x.Offset(row * n + c)) - mu) * rs;
  }
  MIXRT_HOST_DEVICE RowAcc Identity(int) const { return MakeAcc(0.0f); }
  MIXRT_HOST_DEVICE RowAcc Partial(int, int64_t row, int lane, int lanes,
                                   const RowAcc*) const {
    const float mu = mean.LoadFloat(mean.Offset(row));
    const float rs = rstd.LoadFloat(rstd.Offset(row));
    RowAcc r = Identity(0);
    for (int64_t c = lane; c < n; c += lanes) {
      const float dyw = Dyw(row, c);
      r.v[0] += dyw;
      r.v[1] += dyw * Xhat(row, c, mu, rs);
    }
    return r;
  }
  MIXRT_HOST_DEVICE RowAcc Combine(int, const RowAcc& a,
                                   const RowAcc& b) const {
    return MakeAcc(a.v[0] + b.v[0], a.v[1] + b.v[1]);
  }
  MIXRT_HOST_DEVICE void Write(int64_t row, int lane, int lanes,
                               const RowAcc* acc) const {
    const float mu = mean.LoadFloat(mean.Offset(row));
    const float rs = rstd.LoadFloat(rstd.Offset(row));
    const float mean_dyw = acc[0].v[0] / static_cast<float>(n);
    const float mean_dyw_xhat = acc[0].v[1] / static_cast<float>(n);
    for (int64_t c = lane; c < n; c += lanes) {
      const float v =
          rs * (Dyw(row, c) - mean_dyw - Xhat(row, c, mu, rs) * mean_dyw_xhat);
      grad_x.StoreFloat(grad_x.Offset(row * n + c), v);
    }
  }
};

// grad_weight[c] = sum_r g xhat and grad_bias[c] = sum_r g: a column is a
// "row" of this protocol, its lanes stride over the R rows.
struct LayerNormParamGradColumns {
  static constexpr int kPasses = 1;
  DeviceTensor grad_weight;
  DeviceTensor grad_bias;
  DeviceTensor grad_y;
  DeviceTensor x;
  DeviceTensor mean;
  DeviceTensor rstd;
  int64_t rows;
  int64_t n;

  MIXRT_HOST_DEVICE RowAcc Identity(int) const { return MakeAcc(0.0f); }
  MIXRT_HOST_DEVICE RowAcc Partial(int, int64_t column, int lane, int lanes,
                                   const RowAcc*) const {
    RowAcc r = Identity(0);
    for (int64_t row = lane; row < rows; row += lanes) {
      const int64_t i = row * n + column;
      const float g = grad_y.LoadFloat(grad_y.Offset(i));
      const float xhat =
          (x.LoadFloat(x.Offset(i)) - mean.LoadFloat(mean.Offset(row))) *
          rstd.LoadFloat(rstd.Offset(row));
      r.v[0] += g * xhat;
      r.v[1] += g;
    }
    return r;
  }
  MIXRT_HOST_DEVICE RowAcc Combine(int, const RowAcc& a,
                                   const RowAcc& b) const {
    return MakeAcc(a.v[0] + b.v[0], a.v[1] + b.v[1]);
  }
  MIXRT_HOST_DEVICE void Write(int64_t column, int lane, int,
                               const RowAcc* acc) const {
    if (lane != 0) return;
    grad_weight.StoreFloat(grad_weight.Offset(column), acc[0].v[0]);
    grad_bias.StoreFloat(grad_bias.Offset(column), acc[0].v[1]);
  }
};

// Cross entropy over logits [N, C] with i64 targets, label smoothing eps:
// loss = -(1 - eps) logp[t] - eps / C sum_c logp[c]; backward
// g (softmax - q) with q = (1 - eps) [c == t] + eps / C. Pass 0: max;
// pass 1: (sum exp(x - max), sum x). An out-of-range target sets *bad_input.
struct CrossEntropyRows {
  static constexpr int kPasses = 2;
  DeviceTensor out;  // loss [N] f32, or grad_logits [N, C]
  DeviceTensor logits;
  DeviceTensor target;
  DeviceTensor grad_loss;  // Backward only: [N] f32.
  int64_t classes;
  int64_t ignore_index;
  float label_smoothing;
  bool log_probs_input;
  bool backward;
  int32_t* bad_input;

  MIXRT_HOST_DEVICE float Logit(int64_t row, int64_t c) const {
    return logits.LoadFloat(logits.Offset(row * classes + c));
  }
  MIXRT_HOST_DEVICE RowAcc Identity(int pass) const {
    return MakeAcc(pass == 0 ? -INFINITY : 0.0f);
  }
  MIXRT_HOST_DEVICE RowAcc Partial(int pass, int64_t row, int lane, int lanes,
                                   const RowAcc* acc) const {
    RowAcc r = Identity(pass);
    for (int64_t c = lane; c < classes; c += lanes) {
      const float v = Logit(row, c);
      if (pass == 0) {
        r.v[0] = NanMax(r.v[0], v);
      } else {
        r.v[0] += expf(v - acc[0].v[0]);
        r.v[1] += v;
      }
    }
    return r;
  }
  MIXRT_HOST_DEVICE RowAcc Combine(int pass, const RowAcc& a,
                                   const RowAcc& b) const {
    return pass == 0 ? MakeAcc(NanMax(a.v[0], b.v[0]))
                     : MakeAcc(a.v[0] + b.v[0], a.v[1] + b.v[1]);
  }
  MIXRT_HOST_DEVICE void Write(int64_t row, int lane, int lanes,
                               const RowAcc* acc) const {
    const int64_t t = target.LoadInt(target.Offset(row));
    const bool ignored = t == ignore_index;
    if (!ignored && (t < 0 || t >= classes)) {
      if (bad_input != nullptr) *bad_input = 1;
      return;
    }
    const float lse = log_probs_input ? 0.0f : acc[0].v[0] + logf(acc[1].v[0]);
    const float eps = label_smoothing;
    const float uniform = eps / static_cast<float>(classes);
    if (!backward) {
      if (lane != 0) return;
      float loss = 0.0f;
      if (!ignored) {
        const float all = acc[1].v[1] - static_cast<float>(classes) * lse;
        loss = -(1.0f - eps) * (Logit(row, t) - lse) - uniform * all;
      }
      out.StoreFloat(out.Offset(row), loss);
      return;
    }
    const float g = ignored ? 0.0f : grad_loss.LoadFloat(grad_loss.Offset(row));
    for (int64_t c = lane; c < classes; c += lanes) {
      const float q = (c == t ? 1.0f - eps : 0.0f) + uniform;
      const float p = log_probs_input ? 0.0f : expf(Logit(row, c) - lse);
      out.StoreFloat(out.Offset(row * classes + c), g * (p - q));
    }
  }
};

// MIXRT_OP_REDUCE: each output element is a "row" over the reduced axes.
// Accumulators: sum/mean (sum), max/min/abs_max (value), var (Welford).
//
// With split > 1 each output's elements are shared by `split` rows (blocks)
// that store their partials; ReduceCombineFunctor folds them. A full
// reduction to a few values (a loss mean, a gradient norm) then fills the
// GPU instead of running on one multiprocessor.
struct ReduceRows {
  static constexpr int kPasses = 1;
  DeviceTensor out;
  DeviceTensor in;
  MixrtReduceKind kind;
  uint32_t axes_mask;
  float correction;
  int64_t reduced_count;  // Elements per output.
  int64_t split = 1;
  RowAcc* partials = nullptr;  // [outputs * split] when split > 1.

  // Linear index into `in` of the k-th reduced element of output `o`.
  MIXRT_HOST_DEVICE int64_t InputIndex(int64_t o, int64_t k) const {
    int64_t index = 0;
    int64_t scale = 1;
    for (int d = in.ndim - 1; d >= 0; --d) {
      int64_t coord;
      if (axes_mask & (1u << d)) {
        coord = k % in.shape[d];
        k /= in.shape[d];
      } else {
        coord = o % in.shape[d];
        o /= in.shape[d];
      }
      index += coord * scale;
      scale *= in.shape[d];
    }
    return index;
  }
  MIXRT_HOST_DEVICE RowAcc Identity(int) const {
    switch (kind) {
      case MIXRT_REDUCE_MAX:
      case MIXRT_REDUCE_ABS_MAX:
        return MakeAcc(-INFINITY);
      case MIXRT_REDUCE_MIN:
        return MakeAcc(INFINITY);
      default:
        return MakeAcc(0.0f);
    }
  }
  MIXRT_HOST_DEVICE RowAcc Partial(int, int64_t row, int lane, int lanes,
                                   const RowAcc*) const {
    const int64_t o = row / split;
    const int64_t stride = static_cast<int64_t>(lanes) * split;
    RowAcc r = Identity(0);
    for (int64_t k = (row % split) * lanes + lane; k < reduced_count;
         k += stride) {
      const float v = in.LoadFloat(in.Offset(InputIndex(o, k)));
      switch (kind) {
        case MIXRT_REDUCE_MAX:
          r.v[0] = NanMax(r.v[0], v);
          break;
        case MIXRT_REDUCE_ABS_MAX:
          r.v[0] = NanMax(r.v[0], fabsf(v));
          break;
        case MIXRT_REDUCE_MIN:
          r.v[0] = NanMin(r.v[0], v);
          break;
        case MIXRT_REDUCE_VAR:
          r = WelfordAdd(r, v);
          break;
        default:
          r.v[0] += v;
          break;
      }
    }
    return r;
  }
  MIXRT_HOST_DEVICE RowAcc Combine(int, const RowAcc& a,
                                   const RowAcc& b) const {
    switch (kind) {
      case MIXRT_REDUCE_MAX:
      case MIXRT_REDUCE_ABS_MAX:
        return MakeAcc(NanMax(a.v[0], b.v[0]));
      case MIXRT_REDUCE_MIN:
        return MakeAcc(NanMin(a.v[0], b.v[0]));
      case MIXRT_REDUCE_VAR:
        return WelfordCombine(a, b);
      default:
        return MakeAcc(a.v[0] + b.v[0]);
    }
  }
  MIXRT_HOST_DEVICE void Write(int64_t row, int lane, int,
                               const RowAcc* acc) const {
    if (lane != 0) return;
    if (split > 1) {
      partials[row] = acc[0];
    } else {
      Finish(row, acc[0]);
    }
  }
  MIXRT_HOST_DEVICE void Finish(int64_t o, const RowAcc& acc) const {
    const float n = static_cast<float>(reduced_count);
    float v = acc.v[0];
    if (kind == MIXRT_REDUCE_MEAN) v = v / n;
    if (kind == MIXRT_REDUCE_VAR) v = acc.v[2] / (n - correction);
    out.StoreFloat(out.Offset(o), v);
  }
};

// Second stage of a split reduction: output o folds its `split` partials.
struct ReduceCombineFunctor {
  ReduceRows reduce;
  MIXRT_HOST_DEVICE void operator()(int64_t o) const {
    const RowAcc* p = reduce.partials + o * reduce.split;
    RowAcc acc = p[0];
    for (int64_t i = 1; i < reduce.split; ++i) {
      acc = reduce.Combine(0, acc, p[i]);
    }
    reduce.Finish(o, acc);
  }
};

}  // namespace mixrt::gpu

#endif  // MIXRT_BACKENDS_GPU_ROW_FUNCTORS_H_
