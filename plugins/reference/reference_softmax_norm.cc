// softmax, log_softmax and their backward; layer_norm and its backward.
#include <array>
#include <cmath>
#include <vector>

#include "absl/strings/str_cat.h"
#include "mixrt/status_macros.h"
#include "plugins/reference/reference_kernels.h"
#include "plugins/sdk/tensor_ref.h"

namespace mixrt::reference {
namespace {

using sdk::TensorRef;

// Calls fn(offsets) once per row along `axis`: offsets[t] is where that row
// starts in tensor t.
template <int kTensors, typename Fn>
void ForEachRow(const TensorRef& shape_of, int axis,
                const std::array<const int64_t*, kTensors>& strides, Fn&& fn) {
  std::array<int64_t, MIXRT_MAX_DIMS> rows{};
  for (int d = 0; d < shape_of.ndim(); ++d) rows[d] = shape_of.dim(d);
  rows[axis] = 1;
  sdk::ForEachElement<kTensors>(shape_of.ndim(), rows.data(), strides, fn);
}

sdk::Status Softmax(const sdk::KernelCall& call) {
  MIXRT_ASSIGN_OR_RETURN(auto attrs, call.GetAttrs<MixrtAxisAttrs>());
  const int axis = attrs->axis;
  const TensorRef& out = call.outputs[0];
  if (axis < 0 || axis >= out.ndim()) {
    return sdk::InvalidArgumentError(
        absl::StrCat("softmax axis ", axis, " out of range"));
  }
  const int64_t n = out.dim(axis);
  const bool log = call.op == MIXRT_OP_LOG_SOFTMAX ||
                   call.op == MIXRT_OP_LOG_SOFTMAX_BACKWARD;
  const bool backward = call.op == MIXRT_OP_SOFTMAX_BACKWARD ||
                        call.op == MIXRT_OP_LOG_SOFTMAX_BACKWARD;
  std::vector<double> row(n);
  if (!backward) {
    const TensorRef& x = call.inputs[0];
    ForEachRow<2>(out, axis, {x.strides(), out.strides()},
                  [&](const std::array<int64_t, 2>& o) {
                    double max = -INFINITY;
                    for (int64_t i = 0; i < n; ++i) {
                      row[i] = x.LoadFloat(o[0] + i * x.stride(axis));
                      max = std::max(max, row[i]);
                    }
                    double sum = 0;
                    for (int64_t i = 0; i < n; ++i)
                      sum += std::exp(row[i] - max);
                    for (int64_t i = 0; i < n; ++i) {
                      const double v = log ? row[i] - max - std::log(sum)
                                           : std::exp(row[i] - max) / sum;
                      out.StoreFloat(o[1] + i * out.stride(axis),
                                     static_cast<float>(v));
                    }
                  });
    return sdk::OkStatus();
  }
  // grad_in = y * (g - sum(g * y)) for softmax; g - exp(y) * sum(g) for log.
  const TensorRef& g = call.inputs[0];
  const TensorRef& y = call.inputs[1];
  ForEachRow<3>(
      out, axis, {g.strides(), y.strides(), out.strides()},
      [&](const std::array<int64_t, 3>& o) {
        double dot = 0;
        for (int64_t i = 0; i < n; ++i) {
          const double gi = g.LoadFloat(o[0] + i * g.stride(axis));
          dot += log ? gi : gi * y.LoadFloat(o[1] + i * y.stride(axis));
        }
        for (int64_t i = 0; i < n; ++i) {
          const double gi = g.LoadFloat(o[0] + i * g.stride(axis));
          const double yi = y.LoadFloat(o[1] + i * y.stride(axis));
          const double v = log ? gi - std::exp(yi) * dot : yi * (gi - dot);
          out.StoreFloat(o[2] + i * out.stride(axis), static_cast<float>(v));
        }
      });
  return sdk::OkStatus();
}

sdk::Status LayerNorm(const sdk::KernelCall& call) {
  MIXRT_RETURN_IF_ERROR(ExpectArity(call, 1, 3, 3));
  MIXRT_ASSIGN_OR_RETURN(auto attrs, call.GetAttrs<MixrtNormAttrs>());
  const TensorRef& x = call.inputs[0];
  const TensorRef& y = call.outputs[0];
  const TensorRef& mean_out = call.outputs[1];
  const TensorRef& rstd_out = call.outputs[2];
  if (x.ndim() != 2 || !x.same_shape(y) || call.inputs.size() == 2) {
    return sdk::InvalidArgumentError(
        "layer_norm takes x [R, N] and optionally both weight and bias");
  }
  const int64_t rows = x.dim(0), n = x.dim(1);
  const bool affine = call.inputs.size() == 3;
  for (int64_t r = 0; r < rows; ++r) {
    double sum = 0;
    for (int64_t i = 0; i < n; ++i)
      sum += x.LoadFloat(r * x.stride(0) + i * x.stride(1));
    const double mean = sum / n;
    double sq = 0;
    for (int64_t i = 0; i < n; ++i) {
      const double d = x.LoadFloat(r * x.stride(0) + i * x.stride(1)) - mean;
      sq += d * d;
    }
    const double rstd = 1.0 / std::sqrt(sq / n + attrs->eps);
    mean_out.StoreFloat(r * mean_out.stride(0), static_cast<float>(mean));
    rstd_out.StoreFloat(r * rstd_out.stride(0), static_cast<float>(rstd));
    for (int64_t i = 0; i < n; ++i) {
      double v = (x.LoadFloat(r * x.stride(0) + i * x.stride(1)) - mean) * rstd;
      if (affine) {
        v = v * call.inputs[1].LoadFloat(i * call.inputs[1].stride(0)) +
            call.inputs[2].LoadFloat(i * call.inputs[2].stride(0));
      }
      y.StoreFloat(r * y.stride(0) + i * y.stride(1), static_cast<float>(v));
    }
  }
  return sdk::OkStatus();
}

sdk::Status LayerNormBackward(const sdk::KernelCall& call) {
  const bool affine = call.inputs.size() == 5;
  MIXRT_RETURN_IF_ERROR(ExpectArity(call, 4, 5, affine ? 3 : 1));
  const TensorRef& gy = call.inputs[0];
  const TensorRef& x = call.inputs[1];
  const TensorRef& mean = call.inputs[2];
  const TensorRef& rstd = call.inputs[3];
  const TensorRef& gx = call.outputs[0];
  const int64_t rows = x.dim(0), n = x.dim(1);
  std::vector<double> gw(n, 0.0), gb(n, 0.0), dyw(n), xhat(n);
  for (int64_t r = 0; r < rows; ++r) {
    const double mu = mean.LoadFloat(r * mean.stride(0));
    const double rs = rstd.LoadFloat(r * rstd.stride(0));
    double mean_dyw = 0, mean_dyw_xhat = 0;
    for (int64_t i = 0; i < n; ++i) {
      const double g = gy.LoadFloat(r * gy.stride(0) + i * gy.stride(1));
      xhat[i] = (x.LoadFloat(r * x.stride(0) + i * x.stride(1)) - mu) * rs;
      dyw[i] = affine
                   ? g * call.inputs[4].LoadFloat(i * call.inputs[4].stride(0))
                   : g;
      mean_dyw += dyw[i];
      mean_dyw_xhat += dyw[i] * xhat[i];
      gw[i] += g * xhat[i];
      gb[i] += g;
    }
    mean_dyw /= n;
    mean_dyw_xhat /= n;
    for (int64_t i = 0; i < n; ++i) {
      gx.StoreFloat(r * gx.stride(0) + i * gx.stride(1),
                    static_cast<float>(
                        rs * (dyw[i] - mean_dyw - xhat[i] * mean_dyw_xhat)));
    }
  }
  if (affine) {
    for (int64_t i = 0; i < n; ++i) {
      call.outputs[1].StoreFloat(i * call.outputs[1].stride(0),
                                 static_cast<float>(gw[i]));
      call.outputs[2].StoreFloat(i * call.outputs[2].stride(0),
                                 static_cast<float>(gb[i]));
    }
  }
  return sdk::OkStatus();
}

}  // namespace

std::vector<sdk::OpTable::Row> SoftmaxNormOps() {
  return {
      {MIXRT_OP_SOFTMAX, WithArity<1, Softmax, kSameShapes>},
      {MIXRT_OP_LOG_SOFTMAX, WithArity<1, Softmax, kSameShapes>},
      {MIXRT_OP_SOFTMAX_BACKWARD, WithArity<2, Softmax, kSameShapes>},
      {MIXRT_OP_LOG_SOFTMAX_BACKWARD, WithArity<2, Softmax, kSameShapes>},
      {MIXRT_OP_LAYER_NORM, LayerNorm},
      {MIXRT_OP_LAYER_NORM_BACKWARD, LayerNormBackward},
  };
}

}  // namespace mixrt::reference
