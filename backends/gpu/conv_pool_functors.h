// Direct NCHW convolution and pooling, forward and backward, as functors: a
// correct baseline on any GPU (the vendor libraries, cuDNN and MIOpen, are
// not wired in yet, so the capability tables call convolution slow). Every
// gradient is a gather (each output element sums what reaches it), so no
// atomics are needed and results do not depend on thread timing.
#ifndef MIXRT_BACKENDS_GPU_CONV_POOL_FUNCTORS_H_
#define MIXRT_BACKENDS_GPU_CONV_POOL_FUNCTORS_H_

#include <cmath>
#include <cstdint>

#include "backends/gpu/device_tensor.h"
#include "backends/gpu/gemm_epilogue.h"
#include "backends/gpu/row_functors.h"

namespace mixrt::gpu {

struct ConvGeometry {
  int64_t n = 0, c = 0, h = 0, w = 0;  // x
  int64_t o = 0, kh = 1, kw = 1;       // weight [o, c / groups, kh, kw]
  int64_t ho = 0, wo = 0;              // y
  int64_t groups = 1, cg = 0, og = 0;  // channels per group in and out
  int64_t stride[2] = {1, 1};
  int64_t padding[2] = {0, 0};
  int64_t dilation[2] = {1, 1};

  // Input row (col) read by output row oy (col ox) at kernel tap i (j), or
  // -1 where that falls in the padding.
  MIXRT_HOST_DEVICE int64_t InRow(int64_t oy, int64_t i) const {
    const int64_t r = oy * stride[0] - padding[0] + i * dilation[0];
    return r >= 0 && r < h ? r : -1;
  }
  MIXRT_HOST_DEVICE int64_t InCol(int64_t ox, int64_t j) const {
    const int64_t r = ox * stride[1] - padding[1] + j * dilation[1];
    return r >= 0 && r < w ? r : -1;
  }
  // The output row that reads input row r at tap i, or -1 if none does.
  MIXRT_HOST_DEVICE int64_t OutRow(int64_t r, int64_t i) const {
    const int64_t t = r + padding[0] - i * dilation[0];
    if (t < 0 || t % stride[0] != 0 || t / stride[0] >= ho) return -1;
    return t / stride[0];
  }
  MIXRT_HOST_DEVICE int64_t OutCol(int64_t col, int64_t j) const {
    const int64_t t = col + padding[1] - j * dilation[1];
    if (t < 0 || t % stride[1] != 0 || t / stride[1] >= wo) return -1;
    return t / stride[1];
  }
};

MIXRT_HOST_DEVICE inline float At4(const DeviceTensor& t, int64_t a, int64_t b,
                                   int64_t c, int64_t d) {
  return t.LoadFloat(
      t.Offset(((a * t.shape[1] + b) * t.shape[2] + c) * t.shape[3] + d));
}

// y[b, oc, oy, ox] = act(bias[oc] + sum x * w), one output per call.
struct ConvForwardFunctor {
  DeviceTensor y;
  DeviceTensor x;
  DeviceTensor weight;
  DeviceTensor bias;
  bool has_bias;
  uint32_t activation;
  ConvGeometry g;
  MIXRT_HOST_DEVICE void operator()(int64_t i) const {
    const int64_t ox = i % g.wo;
    const int64_t oy = (i / g.wo) % g.ho;
    const int64_t oc = (i / (g.wo * g.ho)) % g.o;
    const int64_t b = i / (g.wo * g.ho * g.o);
    const int64_t first = (oc / g.og) * g.cg;
    float s = has_bias ? bias.LoadFloat(bias.Offset(oc)) : 0.0f;
    for (int64_t ic = 0; ic < g.cg; ++ic) {
      for (int64_t ki = 0; ki < g.kh; ++ki) {
        const int64_t r = g.InRow(oy, ki);
        if (r < 0) continue;
        for (int64_t kj = 0; kj < g.kw; ++kj) {
          const int64_t col = g.InCol(ox, kj);
          if (col < 0) continue;
          s += At4(x, b, first + ic, r, col) * At4(weight, oc, ic, ki, kj);
        }
      }
    }
    y.StoreFloat(y.Offset(i), ApplyActivation(activation, s));
  }
};

// grad_x[b, ch, r, col] = sum over the outputs that read it.
struct ConvBackwardDataFunctor {
  DeviceTensor grad_x;
  DeviceTensor grad_y;
  DeviceTensor weight;
  ConvGeometry g;
  MIXRT_HOST_DEVICE void operator()(int64_t i) const {
    const int64_t col = i % g.w;
    const int64_t r = (i / g.w) % g.h;
    const int64_t ch = (i / (g.w * g.h)) % g.c;
    const int64_t b = i / (g.w * g.h * g.c);
    const int64_t group = ch / g.cg;
    const int64_t ic = ch % g.cg;
    float s = 0.0f;
    for (int64_t oc = group * g.og; oc < (group + 1) * g.og; ++oc) {
      for (int64_t ki = 0; ki < g.kh; ++ki) {
        const int64_t oy = g.OutRow(r, ki);
        if (oy < 0) continue;
        for (int64_t kj = 0; kj < g.kw; ++kj) {
          const int64_t ox = g.OutCol(col, kj);
          if (ox < 0) continue;
          s += At4(grad_y, b, oc, oy, ox) * At4(weight, oc, ic, ki, kj);
        }
      }
    }
    grad_x.StoreFloat(grad_x.Offset(i), s);
  }
};

// grad_w[oc, ic, ki, kj] (row protocol: a weight element per row, lanes over
// the N * Ho * Wo outputs) and, with has_bias, grad_b[oc] for rows < o
// launched separately (bias_only).
struct ConvBackwardWeightsRows {
  static constexpr int kPasses = 1;
  DeviceTensor grad_weight;
  DeviceTensor grad_bias;
  DeviceTensor grad_y;
  DeviceTensor x;
  ConvGeometry g;
  bool bias_only;  // Rows are output channels; sums grad_y.

  MIXRT_HOST_DEVICE RowAcc Identity(int) const { return MakeAcc(0.0f); }
  MIXRT_HOST_DEVICE RowAcc Partial(int, int64_t row, int lane, int lanes,
                                   const RowAcc*) const {
    const int64_t outputs = g.n * g.ho * g.wo;
    float s = 0.0f;
    if (bias_only) {
      for (int64_t e = lane; e < outputs; e += lanes) {
        s += At4(grad_y, e / (g.ho * g.wo), row, (e / g.wo) % g.ho, e % g.wo);
      }
      return MakeAcc(s);
    }
    const int64_t kj = row % g.kw;
    const int64_t ki = (row / g.kw) % g.kh;
    const int64_t ic = (row / (g.kw * g.kh)) % g.cg;
    const int64_t oc = row / (g.kw * g.kh * g.cg);
    const int64_t ch = (oc / g.og) * g.cg + ic;
    for (int64_t e = lane; e < outputs; e += lanes) {
      const int64_t ox = e % g.wo;
      const int64_t oy = (e / g.wo) % g.ho;
      const int64_t b = e / (g.wo * g.ho);
      const int64_t r = g.InRow(oy, ki);
      const int64_t col = g.InCol(ox, kj);
      if (r < 0 || col < 0) continue;
      s += At4(grad_y, b, oc, oy, ox) * At4(x, b, ch, r, col);
    }
    return MakeAcc(s);
  }
  MIXRT_HOST_DEVICE RowAcc Combine(int, const RowAcc& a,
                                   const RowAcc& b) const {
    return MakeAcc(a.v[0] + b.v[0]);
  }
  MIXRT_HOST_DEVICE void Write(int64_t row, int lane, int,
                               const RowAcc* acc) const {
    if (lane != 0) return;
    // Two branches, not a reference to either member: taking the address
    // of a kernel parameter copies it to per-thread scratch on AMD GPUs.
    if (bias_only) {
      grad_bias.StoreFloat(grad_bias.Offset(row), acc[0].v[0]);
    } else {
      grad_weight.StoreFloat(grad_weight.Offset(row), acc[0].v[0]);
    }
  }
};

// Pooling window geometry (MixrtPoolAttrs), NCHW.
struct PoolGeometry {
  int64_t n = 0, c = 0, h = 0, w = 0, ho = 0, wo = 0;
  int64_t kernel[2] = {1, 1};
  int64_t stride[2] = {1, 1};
  int64_t padding[2] = {0, 0};
  bool max = true;
};

// The window of output (oy, ox) in plane `plane` (b * c + ch): the first
// maximum (a NaN wins and stays) or the sum, as the reference defines.
struct PoolWindow {
  float best;
  int64_t best_r;
  int64_t best_c;
  float sum;
};

MIXRT_HOST_DEVICE inline PoolWindow ScanPoolWindow(const DeviceTensor& x,
                                                   const PoolGeometry& g,
                                                   int64_t plane, int64_t oy,
                                                   int64_t ox) {
  PoolWindow win{-INFINITY, -1, -1, 0.0f};
  for (int64_t i = 0; i < g.kernel[0]; ++i) {
    const int64_t r = oy * g.stride[0] - g.padding[0] + i;
    for (int64_t j = 0; j < g.kernel[1]; ++j) {
      const int64_t col = ox * g.stride[1] - g.padding[1] + j;
      if (r < 0 || r >= g.h || col < 0 || col >= g.w) continue;
      const float v = x.LoadFloat(x.Offset((plane * g.h + r) * g.w + col));
      win.sum += v;
      if (win.best_r < 0 || v > win.best || (v != v && win.best == win.best)) {
        win.best = v;
        win.best_r = r;
        win.best_c = col;
      }
    }
  }
  return win;
}

struct PoolForwardFunctor {
  DeviceTensor y;
  DeviceTensor x;
  PoolGeometry g;
  MIXRT_HOST_DEVICE void operator()(int64_t i) const {
    const int64_t ox = i % g.wo;
    const int64_t oy = (i / g.wo) % g.ho;
    const PoolWindow win = ScanPoolWindow(x, g, i / (g.wo * g.ho), oy, ox);
    const float divisor = static_cast<float>(g.kernel[0] * g.kernel[1]);
    y.StoreFloat(y.Offset(i), g.max ? win.best : win.sum / divisor);
  }
};

// grad_x[plane, r, col]: the gradients of every window containing it that
// routes to it (max: only where it is that window's first maximum).
struct PoolBackwardFunctor {
  DeviceTensor grad_x;
  DeviceTensor grad_y;
  DeviceTensor x;
  PoolGeometry g;
  MIXRT_HOST_DEVICE void operator()(int64_t i) const {
    const int64_t col = i % g.w;
    const int64_t r = (i / g.w) % g.h;
    const int64_t plane = i / (g.w * g.h);
    const float divisor = static_cast<float>(g.kernel[0] * g.kernel[1]);
    float s = 0.0f;
    for (int64_t ki = 0; ki < g.kernel[0]; ++ki) {
      const int64_t t = r + g.padding[0] - ki;
      if (t < 0 || t % g.stride[0] != 0 || t / g.stride[0] >= g.ho) continue;
      const int64_t oy = t / g.stride[0];
      for (int64_t kj = 0; kj < g.kernel[1]; ++kj) {
        const int64_t u = col + g.padding[1] - kj;
        if (u < 0 || u % g.stride[1] != 0 || u / g.stride[1] >= g.wo) continue;
        const int64_t ox = u / g.stride[1];
        const float go =
            grad_y.LoadFloat(grad_y.Offset((plane * g.ho + oy) * g.wo + ox));
        if (!g.max) {
          s += go / divisor;
          continue;
        }
        const PoolWindow win = ScanPoolWindow(x, g, plane, oy, ox);
        if (win.best_r == r && win.best_c == col) s += go;
      }
    }
    grad_x.StoreFloat(grad_x.Offset(i), s);
  }
};

}  // namespace mixrt::gpu

#endif  // MIXRT_BACKENDS_GPU_CONV_POOL_FUNCTORS_H_
