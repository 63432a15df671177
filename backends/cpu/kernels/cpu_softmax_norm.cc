// softmax / log_softmax forward on oneDNN for f32 and bf16; f16, the
// backward kernels and layer_norm run as parallel row loops in f32 with
// double row sums. (oneDNN 2.6.3 serves layer normalization here with its
// non-jit simple_layer_normalization, no faster than these loops.)
#include "backends/cpu/kernels/cpu_softmax_norm.h"

#include <cmath>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "backends/cpu/fusion/fused_norm.h"
#include "backends/cpu/kernels/float_rows.h"
#include "backends/cpu/kernels/lane_sums.h"
#include "backends/cpu/kernels/parallel.h"
#include "backends/cpu/onednn/onednn_compat.h"
#include "backends/cpu/onednn/onednn_context.h"
#include "mixrt/status_macros.h"
#include "plugins/sdk/tensor_ref.h"

namespace mixrt::cpu {

void LayerNormRows(const sdk::TensorRef& x, const sdk::TensorRef* weight,
                   const sdk::TensorRef* bias, float eps, void* y,
                   MixrtDtype y_dtype, float* mean_out, float* rstd_out) {
  const int64_t rows = x.dim(0), n = x.dim(1);
  std::vector<float> w(n, 1.0f), b(n, 0.0f);
  if (weight != nullptr)
    LoadRow(weight->data(), weight->dtype(), 0, n, w.data());
  if (bias != nullptr) LoadRow(bias->data(), bias->dtype(), 0, n, b.data());
  ParallelFor(rows, GrainFor(n), [&](int64_t begin, int64_t end) {
    std::vector<float> row(n);
    for (int64_t r = begin; r < end; ++r) {
      LoadRow(x.data(), x.dtype(), r * n, n, row.data());
      const float* v = row.data();
      const double mean =
          SumInLanes(n, [v](int64_t i) { return static_cast<double>(v[i]); }) /
          n;
      const double sq = SumInLanes(n, [v, mean](int64_t i) {
        const double d = v[i] - mean;
        return d * d;
      });
      const auto rstd = static_cast<float>(1.0 / std::sqrt(sq / n + eps));
      const auto m = static_cast<float>(mean);
      if (mean_out != nullptr) mean_out[r] = m;
      if (rstd_out != nullptr) rstd_out[r] = rstd;
      for (int64_t i = 0; i < n; ++i)
        row[i] = (row[i] - m) * rstd * w[i] + b[i];
      StoreRow(row.data(), n, y, y_dtype, r * n);
    }
  });
}

void LayerNormBackwardRows(const sdk::TensorRef& gy, const sdk::TensorRef& x,
                           const float* mean, const float* rstd,
                           const sdk::TensorRef* weight, void* gx,
                           MixrtDtype gx_dtype, const float* residual,
                           void* grad_weight, void* grad_bias,
                           MixrtDtype param_dtype) {
  const int64_t rows = x.dim(0), n = x.dim(1);
  std::vector<float> w(n, 1.0f);
  if (weight != nullptr)
    LoadRow(weight->data(), weight->dtype(), 0, n, w.data());
  // Either parameter gradient alone is asked for when the other's
  // parameter is frozen (a GPT port's bias=False LayerNorm): each is
  // written only when its place is given.
  const bool affine = grad_weight != nullptr || grad_bias != nullptr;
  const int threads = omp_get_max_threads();
  // Per-thread partial sums for the parameter gradients, added at the end.
  std::vector<std::vector<double>> gw(threads,
                                      std::vector<double>(affine ? n : 0, 0.0));
  std::vector<std::vector<double>> gb(threads,
                                      std::vector<double>(affine ? n : 0, 0.0));
  ParallelFor(rows, GrainFor(n), [&](int64_t begin, int64_t end) {
    const int t = omp_get_thread_num();
    std::vector<float> g(n), xr(n), out(n);
    for (int64_t r = begin; r < end; ++r) {
      LoadRow(gy.data(), gy.dtype(), r * n, n, g.data());
      LoadRow(x.data(), x.dtype(), r * n, n, xr.data());
      // Locals, so the stores below cannot alias what the loop reads (the
      // compiler reloaded mean and rstd per element and kept it scalar).
      const float row_mean = mean[r], row_rstd = rstd[r];
      float* __restrict xh = xr.data();
      float* __restrict dy_w = out.data();
      const float* __restrict gr = g.data();
      const float* __restrict wr = w.data();
      if (affine) {
        double* __restrict gw_t = gw[t].data();
        double* __restrict gb_t = gb[t].data();
        for (int64_t i = 0; i < n; ++i) {
          const float xhat = (xh[i] - row_mean) * row_rstd;
          gw_t[i] += gr[i] * xhat;
          gb_t[i] += gr[i];
          xh[i] = xhat;
          dy_w[i] = gr[i] * wr[i];  // Until the output overwrites it.
        }
      } else {
        for (int64_t i = 0; i < n; ++i) {
          xh[i] = (xh[i] - row_mean) * row_rstd;
          dy_w[i] = gr[i] * wr[i];
        }
      }
      if (gx == nullptr) continue;
      const double mean_dyw = SumInLanes(
          n, [dy_w](int64_t i) { return static_cast<double>(dy_w[i]); });
      const double mean_dyw_xhat = SumInLanes(n, [dy_w, xh](int64_t i) {
        return static_cast<double>(dy_w[i] * xh[i]);
      });
      const auto a = static_cast<float>(mean_dyw / n);
      const auto c = static_cast<float>(mean_dyw_xhat / n);
      for (int64_t i = 0; i < n; ++i) {
        out[i] = rstd[r] * (g[i] * w[i] - a - xr[i] * c);
      }
      if (residual != nullptr) {
        // The f32 sum the binary op would have stored, then one rounding.
        const float* __restrict rr = residual + r * n;
        for (int64_t i = 0; i < n; ++i) out[i] = rr[i] + out[i];
      }
      StoreRow(out.data(), n, gx, gx_dtype, r * n);
    }
  });
  if (affine) {
    std::vector<float> sw(n, 0.0f), sb(n, 0.0f);
    for (int64_t i = 0; i < n; ++i) {
      double a = 0, c = 0;
      for (int t = 0; t < threads; ++t) {
        a += gw[t][i];
        c += gb[t][i];
      }
      sw[i] = static_cast<float>(a);
      sb[i] = static_cast<float>(c);
    }
    if (grad_weight != nullptr) {
      StoreRow(sw.data(), n, grad_weight, param_dtype, 0);
    }
    if (grad_bias != nullptr) StoreRow(sb.data(), n, grad_bias, param_dtype, 0);
  }
}

namespace {

using sdk::TensorRef;

bool OneDnnType32(MixrtDtype dtype) {
  return dtype == MIXRT_DTYPE_F32 || dtype == MIXRT_DTYPE_BF16;
}

// A dense tensor seen as [outer, n, inner] around `axis`.
struct RowGeometry {
  int64_t outer = 1, n = 1, inner = 1;
};

RowGeometry Geometry(const TensorRef& t, int axis) {
  RowGeometry g;
  for (int d = 0; d < t.ndim(); ++d) {
    if (d < axis) g.outer *= t.dim(d);
    if (d == axis) g.n = t.dim(d);
    if (d > axis) g.inner *= t.dim(d);
  }
  return g;
}

// Calls fn(row_values...) for each row along the axis, in parallel: rows are
// gathered into float buffers (stride `inner`) and written back.
template <typename Fn>
void ForEachRow(const sdk::KernelCall& call, const RowGeometry& g, Fn&& fn) {
  const TensorRef& out = call.outputs[0];
  ParallelFor(
      g.outer * g.inner, GrainFor(g.n), [&](int64_t begin, int64_t end) {
        std::vector<std::vector<float>> rows(call.inputs.size(),
                                             std::vector<float>(g.n));
        std::vector<float> result(g.n);
        for (int64_t r = begin; r < end; ++r) {
          const int64_t base = (r / g.inner) * g.n * g.inner + r % g.inner;
          for (size_t k = 0; k < call.inputs.size(); ++k) {
            for (int64_t i = 0; i < g.n; ++i) {
              rows[k][i] = call.inputs[k].LoadFloat(base + i * g.inner);
            }
          }
          fn(rows, result);
          for (int64_t i = 0; i < g.n; ++i) {
            out.StoreFloat(base + i * g.inner, result[i]);
          }
        }
      });
}

// False when this oneDNN build and CPU have no such softmax.
bool SoftmaxOneDnn(bool log, int axis, const TensorRef& in,
                   const TensorRef& out) {
  const dnnl::memory::desc src = MemoryDesc(in);
  const dnnl::memory::desc dst = MemoryDesc(out);
  auto prim = TryGetPrimitive(
      absl::StrCat("softmax|", log, "|", axis, "|", DescKey(in), "|",
                   DescKey(out)),
      [&] {
        SoftmaxPrimitive p = MakeSoftmax(log, src, dst, axis);
        return CachedPrimitive{p.primitive, p.implementation, {}};
      });
  if (prim == nullptr) return false;
  prim->primitive.execute(ThreadStream(),
                          {{DNNL_ARG_SRC, Memory(src, in.data())},
                           {DNNL_ARG_DST, Memory(dst, out.data())}});
  ThreadStream().wait();
  return true;
}

absl::Status Softmax(const sdk::KernelCall& call) {
  MIXRT_ASSIGN_OR_RETURN(auto attrs, call.GetAttrs<MixrtAxisAttrs>());
  const int axis = attrs->axis;
  const TensorRef& out = call.outputs[0];
  if (axis < 0 || axis >= out.ndim()) {
    return absl::InvalidArgumentError(
        absl::StrCat("softmax axis ", axis, " out of range"));
  }
  for (const TensorRef& t : call.inputs) {
    if (!t.same_shape(out) || t.dtype() != out.dtype()) {
      return absl::InvalidArgumentError("softmax: shapes or dtypes differ");
    }
  }
  const bool log = call.op == MIXRT_OP_LOG_SOFTMAX ||
                   call.op == MIXRT_OP_LOG_SOFTMAX_BACKWARD;
  const bool backward = call.inputs.size() == 2;
  if (!backward && OneDnnType32(out.dtype()) &&
      SoftmaxOneDnn(log, axis, call.inputs[0], out)) {
    return absl::OkStatus();
  }
  ForEachRow(
      call, Geometry(out, axis),
      [&](const std::vector<std::vector<float>>& rows,
          std::vector<float>& result) {
        const int64_t n = static_cast<int64_t>(result.size());
        if (!backward) {
          float max = -INFINITY;
          for (float v : rows[0]) max = std::max(max, v);
          double sum = 0;
          for (float v : rows[0]) sum += std::exp(v - max);
          const float lse = max + static_cast<float>(std::log(sum));
          for (int64_t i = 0; i < n; ++i) {
            result[i] = log ? rows[0][i] - lse : std::exp(rows[0][i] - lse);
          }
          return;
        }
        const std::vector<float>& g = rows[0];
        const std::vector<float>& y = rows[1];
        double dot = 0;
        for (int64_t i = 0; i < n; ++i) dot += log ? g[i] : g[i] * y[i];
        const auto d = static_cast<float>(dot);
        for (int64_t i = 0; i < n; ++i) {
          result[i] = log ? g[i] - std::exp(y[i]) * d : y[i] * (g[i] - d);
        }
      });
  return absl::OkStatus();
}

absl::Status LayerNorm(const sdk::KernelCall& call) {
  MIXRT_ASSIGN_OR_RETURN(auto attrs, call.GetAttrs<MixrtNormAttrs>());
  const size_t nin = call.inputs.size();
  if ((nin != 1 && nin != 3) || call.outputs.size() != 3) {
    return absl::InvalidArgumentError(
        "layer_norm takes x [R, N] and optionally both weight and bias");
  }
  const TensorRef& x = call.inputs[0];
  const TensorRef& y = call.outputs[0];
  if (x.ndim() != 2 || !x.same_shape(y) || x.dtype() != y.dtype() ||
      call.outputs[1].dtype() != MIXRT_DTYPE_F32 ||
      call.outputs[2].dtype() != MIXRT_DTYPE_F32) {
    return absl::InvalidArgumentError(
        "layer_norm: x and y must be [R, N], mean and rstd f32 [R]");
  }
  LayerNormRows(x, nin == 3 ? &call.inputs[1] : nullptr,
                nin == 3 ? &call.inputs[2] : nullptr,
                static_cast<float>(attrs->eps), y.data(), y.dtype(),
                static_cast<float*>(call.outputs[1].data()),
                static_cast<float*>(call.outputs[2].data()));
  return absl::OkStatus();
}

absl::Status LayerNormBackward(const sdk::KernelCall& call) {
  const bool affine = call.inputs.size() == 5;
  if ((call.inputs.size() != 4 && !affine) ||
      call.outputs.size() != (affine ? 3u : 1u)) {
    return absl::InvalidArgumentError("layer_norm_backward: wrong tensors");
  }
  const TensorRef& gx = call.outputs[0];
  LayerNormBackwardRows(
      call.inputs[0], call.inputs[1],
      static_cast<const float*>(call.inputs[2].data()),
      static_cast<const float*>(call.inputs[3].data()),
      affine ? &call.inputs[4] : nullptr, gx.data(), gx.dtype(),
      /*residual=*/nullptr, affine ? call.outputs[1].data() : nullptr,
      affine ? call.outputs[2].data() : nullptr,
      affine ? call.outputs[1].dtype() : MIXRT_DTYPE_F32);
  return absl::OkStatus();
}

}  // namespace

absl::Status RunSoftmax(const sdk::KernelCall& call) {
  if (call.inputs.size() != 1 || call.outputs.size() != 1) {
    return absl::InvalidArgumentError("softmax: wrong number of tensors");
  }
  return Softmax(call);
}

absl::Status RunSoftmaxBackward(const sdk::KernelCall& call) {
  if (call.inputs.size() != 2 || call.outputs.size() != 1) {
    return absl::InvalidArgumentError("softmax: wrong number of tensors");
  }
  return Softmax(call);
}

absl::Status RunLayerNorm(const sdk::KernelCall& call) {
  return LayerNorm(call);
}

absl::Status RunLayerNormBackward(const sdk::KernelCall& call) {
  return LayerNormBackward(call);
}

}  // namespace mixrt::cpu
