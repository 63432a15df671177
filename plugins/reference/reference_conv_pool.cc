// conv2d (forward, backward data, backward weights) and pool2d, as direct
// loops over NCHW.
#include <cmath>
#include <vector>

#include "absl/strings/str_cat.h"
#include "mixrt/status_macros.h"
#include "plugins/reference/reference_kernels.h"
#include "plugins/sdk/pointwise_math.h"
#include "plugins/sdk/tensor_ref.h"

namespace mixrt::reference {
namespace {

using sdk::TensorRef;

double At(const TensorRef& t, int64_t a, int64_t b, int64_t c, int64_t d) {
  return t.LoadFloat(a * t.stride(0) + b * t.stride(1) + c * t.stride(2) +
                     d * t.stride(3));
}

void Put(const TensorRef& t, int64_t a, int64_t b, int64_t c, int64_t d,
         double v) {
  t.StoreFloat(
      a * t.stride(0) + b * t.stride(1) + c * t.stride(2) + d * t.stride(3),
      static_cast<float>(v));
}

// Geometry shared by the three convolution kernels.
struct Conv {
  int64_t n, c, h, w, o, kh, kw, ho, wo, groups, cg, og;
  MixrtConvAttrs a;

  // Input row/col read by output (y, x) and kernel tap (i, j), or -1.
  int64_t InRow(int64_t y, int64_t i) const {
    const int64_t r = y * a.stride[0] - a.padding[0] + i * a.dilation[0];
    return r >= 0 && r < h ? r : -1;
  }
  int64_t InCol(int64_t x, int64_t j) const {
    const int64_t r = x * a.stride[1] - a.padding[1] + j * a.dilation[1];
    return r >= 0 && r < w ? r : -1;
  }
};

sdk::StatusOr<Conv> Geometry(const sdk::KernelCall& call, const TensorRef& x,
                             const TensorRef& weight, const TensorRef& y) {
  MIXRT_ASSIGN_OR_RETURN(auto attrs, call.GetAttrs<MixrtConvAttrs>());
  Conv g;
  g.a = *attrs;
  if (x.ndim() != 4 || weight.ndim() != 4 || y.ndim() != 4 || g.a.groups < 1) {
    return sdk::InvalidArgumentError("conv2d takes 4-d NCHW tensors");
  }
  g.n = x.dim(0), g.c = x.dim(1), g.h = x.dim(2), g.w = x.dim(3);
  g.o = weight.dim(0), g.kh = weight.dim(2), g.kw = weight.dim(3);
  g.ho = y.dim(2), g.wo = y.dim(3), g.groups = g.a.groups;
  if (g.c % g.groups != 0 || g.o % g.groups != 0 ||
      weight.dim(1) != g.c / g.groups || y.dim(0) != g.n || y.dim(1) != g.o) {
    return sdk::InvalidArgumentError("conv2d: channel counts do not match");
  }
  g.cg = g.c / g.groups;
  g.og = g.o / g.groups;
  return g;
}

sdk::Status ConvForward(const sdk::KernelCall& call) {
  MIXRT_RETURN_IF_ERROR(ExpectArity(call, 2, 3, 1));
  const TensorRef& x = call.inputs[0];
  const TensorRef& wt = call.inputs[1];
  const TensorRef& y = call.outputs[0];
  MIXRT_ASSIGN_OR_RETURN(auto geometry, Geometry(call, x, wt, y));
  const Conv& g = geometry;
  const bool bias = call.inputs.size() == 3;
  for (int64_t b = 0; b < g.n; ++b)
    for (int64_t oc = 0; oc < g.o; ++oc) {
      const int64_t grp = oc / g.og;
      for (int64_t oy = 0; oy < g.ho; ++oy)
        for (int64_t ox = 0; ox < g.wo; ++ox) {
          double s =
              bias ? call.inputs[2].LoadFloat(oc * call.inputs[2].stride(0))
                   : 0.0;
          for (int64_t ic = 0; ic < g.cg; ++ic)
            for (int64_t i = 0; i < g.kh; ++i) {
              const int64_t r = g.InRow(oy, i);
              if (r < 0) continue;
              for (int64_t j = 0; j < g.kw; ++j) {
                const int64_t col = g.InCol(ox, j);
                if (col < 0) continue;
                s += At(x, b, grp * g.cg + ic, r, col) * At(wt, oc, ic, i, j);
              }
            }
          if (g.a.activation == MIXRT_ACTIVATION_RELU) {
            s = sdk::ApplyUnary<double>(MIXRT_UNARY_RELU, s, 0, 0);
          } else if (g.a.activation == MIXRT_ACTIVATION_GELU) {
            s = sdk::ApplyUnary<double>(MIXRT_UNARY_GELU, s, 0, 0);
          } else if (g.a.activation == MIXRT_ACTIVATION_GELU_TANH) {
            s = sdk::ApplyUnary<double>(MIXRT_UNARY_GELU_TANH, s, 0, 0);
          }
          Put(y, b, oc, oy, ox, s);
        }
    }
  return sdk::OkStatus();
}

sdk::Status ConvBackwardData(const sdk::KernelCall& call) {
  MIXRT_RETURN_IF_ERROR(ExpectArity(call, 2, 2, 1));
  const TensorRef& gy = call.inputs[0];
  const TensorRef& wt = call.inputs[1];
  const TensorRef& gx = call.outputs[0];
  MIXRT_ASSIGN_OR_RETURN(auto geometry, Geometry(call, gx, wt, gy));
  const Conv& g = geometry;
  std::vector<double> acc(g.n * g.c * g.h * g.w, 0.0);
  for (int64_t b = 0; b < g.n; ++b)
    for (int64_t oc = 0; oc < g.o; ++oc) {
      const int64_t grp = oc / g.og;
      for (int64_t oy = 0; oy < g.ho; ++oy)
        for (int64_t ox = 0; ox < g.wo; ++ox) {
          const double go = At(gy, b, oc, oy, ox);
          for (int64_t ic = 0; ic < g.cg; ++ic)
            for (int64_t i = 0; i < g.kh; ++i) {
              const int64_t r = g.InRow(oy, i);
              if (r < 0) continue;
              for (int64_t j = 0; j < g.kw; ++j) {
                const int64_t col = g.InCol(ox, j);
                if (col < 0) continue;
                acc[((b * g.c + grp * g.cg + ic) * g.h + r) * g.w + col] +=
                    go * At(wt, oc, ic, i, j);
              }
            }
        }
    }
  for (int64_t b = 0; b < g.n; ++b)
    for (int64_t ch = 0; ch < g.c; ++ch)
      for (int64_t r = 0; r < g.h; ++r)
        for (int64_t col = 0; col < g.w; ++col) {
          Put(gx, b, ch, r, col, acc[((b * g.c + ch) * g.h + r) * g.w + col]);
        }
  return sdk::OkStatus();
}

sdk::Status ConvBackwardWeights(const sdk::KernelCall& call) {
  if (call.inputs.size() != 2 || call.outputs.empty() ||
      call.outputs.size() > 2) {
    return sdk::InvalidArgumentError(
        "conv2d_backward_weights takes (grad_out, x) and (grad_w[, grad_b])");
  }
  const TensorRef& gy = call.inputs[0];
  const TensorRef& x = call.inputs[1];
  const TensorRef& gw = call.outputs[0];
  MIXRT_ASSIGN_OR_RETURN(auto geometry, Geometry(call, x, gw, gy));
  const Conv& g = geometry;
  for (int64_t oc = 0; oc < g.o; ++oc) {
    const int64_t grp = oc / g.og;
    for (int64_t ic = 0; ic < g.cg; ++ic)
      for (int64_t i = 0; i < g.kh; ++i)
        for (int64_t j = 0; j < g.kw; ++j) {
          double s = 0;
          for (int64_t b = 0; b < g.n; ++b)
            for (int64_t oy = 0; oy < g.ho; ++oy) {
              const int64_t r = g.InRow(oy, i);
              if (r < 0) continue;
              for (int64_t ox = 0; ox < g.wo; ++ox) {
                const int64_t col = g.InCol(ox, j);
                if (col < 0) continue;
                s += At(gy, b, oc, oy, ox) * At(x, b, grp * g.cg + ic, r, col);
              }
            }
          Put(gw, oc, ic, i, j, s);
        }
  }
  if (call.outputs.size() == 2) {
    const TensorRef& gb = call.outputs[1];
    for (int64_t oc = 0; oc < g.o; ++oc) {
      double s = 0;
      for (int64_t b = 0; b < g.n; ++b)
        for (int64_t oy = 0; oy < g.ho; ++oy)
          for (int64_t ox = 0; ox < g.wo; ++ox) s += At(gy, b, oc, oy, ox);
      gb.StoreFloat(oc * gb.stride(0), static_cast<float>(s));
    }
  }
  return sdk::OkStatus();
}

sdk::Status Pool(const sdk::KernelCall& call, bool backward) {
  MIXRT_RETURN_IF_ERROR(
      ExpectArity(call, backward ? 2 : 1, backward ? 2 : 1, 1));
  MIXRT_ASSIGN_OR_RETURN(auto attrs, call.GetAttrs<MixrtPoolAttrs>());
  const MixrtPoolAttrs a = *attrs;
  const TensorRef& x = call.inputs[backward ? 1 : 0];
  const TensorRef& y = backward ? call.inputs[0] : call.outputs[0];
  if (x.ndim() != 4 || y.ndim() != 4) {
    return sdk::InvalidArgumentError("pool2d takes 4-d NCHW tensors");
  }
  const int64_t n = x.dim(0), c = x.dim(1), h = x.dim(2), w = x.dim(3);
  const int64_t ho = y.dim(2), wo = y.dim(3);
  const bool max = a.kind == MIXRT_POOL_MAX;
  std::vector<double> grad(backward ? n * c * h * w : 0, 0.0);
  for (int64_t b = 0; b < n; ++b)
    for (int64_t ch = 0; ch < c; ++ch)
      for (int64_t oy = 0; oy < ho; ++oy)
        for (int64_t ox = 0; ox < wo; ++ox) {
          double best = -INFINITY, sum = 0;
          int64_t best_r = -1, best_c = -1;
          for (int64_t i = 0; i < a.kernel[0]; ++i) {
            const int64_t r = oy * a.stride[0] - a.padding[0] + i;
            for (int64_t j = 0; j < a.kernel[1]; ++j) {
              const int64_t col = ox * a.stride[1] - a.padding[1] + j;
              if (r < 0 || r >= h || col < 0 || col >= w) continue;
              const double v = At(x, b, ch, r, col);
              sum += v;
              // The first maximum wins; a NaN wins and stays (propagates).
              if (best_r < 0 || v > best ||
                  (std::isnan(v) && !std::isnan(best))) {
                best = v;
                best_r = r;
                best_c = col;
              }
            }
          }
          const double divisor = static_cast<double>(a.kernel[0]) * a.kernel[1];
          if (!backward) {
            Put(call.outputs[0], b, ch, oy, ox, max ? best : sum / divisor);
            continue;
          }
          const double go = At(y, b, ch, oy, ox);
          if (max) {
            if (best_r >= 0)
              grad[((b * c + ch) * h + best_r) * w + best_c] += go;
            continue;
          }
          for (int64_t i = 0; i < a.kernel[0]; ++i) {
            const int64_t r = oy * a.stride[0] - a.padding[0] + i;
            for (int64_t j = 0; j < a.kernel[1]; ++j) {
              const int64_t col = ox * a.stride[1] - a.padding[1] + j;
              if (r < 0 || r >= h || col < 0 || col >= w) continue;
              grad[((b * c + ch) * h + r) * w + col] += go / divisor;
            }
          }
        }
  if (backward) {
    for (int64_t b = 0; b < n; ++b)
      for (int64_t ch = 0; ch < c; ++ch)
        for (int64_t r = 0; r < h; ++r)
          for (int64_t col = 0; col < w; ++col) {
            Put(call.outputs[0], b, ch, r, col,
                grad[((b * c + ch) * h + r) * w + col]);
          }
  }
  return sdk::OkStatus();
}

}  // namespace

std::vector<sdk::OpTable::Row> ConvPoolOps() {
  return {
      {MIXRT_OP_CONV2D, ConvForward},
      {MIXRT_OP_CONV2D_BACKWARD_DATA, ConvBackwardData},
      {MIXRT_OP_CONV2D_BACKWARD_WEIGHTS, ConvBackwardWeights},
      {MIXRT_OP_POOL2D,
       [](const sdk::KernelCall& call) { return Pool(call, false); }},
      {MIXRT_OP_POOL2D_BACKWARD,
       [](const sdk::KernelCall& call) { return Pool(call, true); }},
  };
}

}  // namespace mixrt::reference
