// batch_norm (training and eval, forward and backward) and embedding.
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

// Calls fn(channel, offset) for every element of x (dim 1 is the channel).
template <typename Fn>
void ForEachByChannel(const TensorRef& x, Fn&& fn) {
  std::array<int64_t, MIXRT_MAX_DIMS> channel_stride{};
  channel_stride[1] = 1;
  sdk::ForEachElement<2>(
      x.ndim(), x.shape(), {x.strides(), channel_stride.data()},
      [&](const std::array<int64_t, 2>& o) { fn(o[1], o[0]); });
}

double Load1(const TensorRef& t, int64_t i) {
  return t.LoadFloat(i * t.stride(0));
}
void Store1(const TensorRef& t, int64_t i, double v) {
  t.StoreFloat(i * t.stride(0), static_cast<float>(v));
}

sdk::Status BatchNorm(const sdk::KernelCall& call) {
  MIXRT_RETURN_IF_ERROR(ExpectArity(call, 3, 3, 5));
  MIXRT_ASSIGN_OR_RETURN(auto attrs, call.GetAttrs<MixrtBatchNormAttrs>());
  const MixrtBatchNormAttrs a = *attrs;
  const TensorRef& x = call.inputs[0];
  const TensorRef& weight = call.inputs[1];
  const TensorRef& bias = call.inputs[2];
  const TensorRef& y = call.outputs[0];
  const TensorRef& save_mean = call.outputs[1];
  const TensorRef& save_invstd = call.outputs[2];
  const TensorRef& running_mean = call.outputs[3];
  const TensorRef& running_var = call.outputs[4];
  if (x.ndim() < 2 || !x.same_shape(y)) {
    return sdk::InvalidArgumentError("batch_norm takes x [N, C, ...]");
  }
  const int64_t c = x.dim(1);
  const int64_t count = x.numel() / std::max<int64_t>(c, 1);
  std::vector<double> mean(c, 0.0), var(c, 0.0);
  if (a.training) {
    if (count < 2) {
      return sdk::InvalidArgumentError(
          "batch_norm: training needs more than one value per channel");
    }
    ForEachByChannel(
        x, [&](int64_t ch, int64_t o) { mean[ch] += x.LoadFloat(o); });
    for (double& m : mean) m /= count;
    ForEachByChannel(x, [&](int64_t ch, int64_t o) {
      const double d = x.LoadFloat(o) - mean[ch];
      var[ch] += d * d;
    });
    for (int64_t ch = 0; ch < c; ++ch) {
      const double biased = var[ch] / count;
      Store1(
          running_mean, ch,
          (1 - a.momentum) * Load1(running_mean, ch) + a.momentum * mean[ch]);
      Store1(running_var, ch,
             (1 - a.momentum) * Load1(running_var, ch) +
                 a.momentum * var[ch] / (count - 1));
      var[ch] = biased;
    }
  } else {
    for (int64_t ch = 0; ch < c; ++ch) {
      mean[ch] = Load1(running_mean, ch);
      var[ch] = Load1(running_var, ch);
    }
  }
  std::vector<double> invstd(c);
  for (int64_t ch = 0; ch < c; ++ch) {
    invstd[ch] = 1.0 / std::sqrt(var[ch] + a.eps);
    Store1(save_mean, ch, mean[ch]);
    Store1(save_invstd, ch, invstd[ch]);
  }
  std::array<int64_t, MIXRT_MAX_DIMS> channel_stride{};
  channel_stride[1] = 1;
  sdk::ForEachElement<3>(x.ndim(), x.shape(),
                         {x.strides(), y.strides(), channel_stride.data()},
                         [&](const std::array<int64_t, 3>& o) {
                           const int64_t ch = o[2];
                           const double v = (x.LoadFloat(o[0]) - mean[ch]) *
                                                invstd[ch] * Load1(weight, ch) +
                                            Load1(bias, ch);
                           y.StoreFloat(o[1], static_cast<float>(v));
                         });
  return sdk::OkStatus();
}

sdk::Status BatchNormBackward(const sdk::KernelCall& call) {
  MIXRT_RETURN_IF_ERROR(ExpectArity(call, 5, 5, 3));
  MIXRT_ASSIGN_OR_RETURN(auto attrs, call.GetAttrs<MixrtBatchNormAttrs>());
  const TensorRef& gy = call.inputs[0];
  const TensorRef& x = call.inputs[1];
  const TensorRef& weight = call.inputs[2];
  const TensorRef& mean = call.inputs[3];
  const TensorRef& invstd = call.inputs[4];
  const TensorRef& gx = call.outputs[0];
  const int64_t c = x.dim(1);
  const int64_t count = x.numel() / std::max<int64_t>(c, 1);
  std::vector<double> sum_g(c, 0.0), sum_gx(c, 0.0);
  std::array<int64_t, MIXRT_MAX_DIMS> channel_stride{};
  channel_stride[1] = 1;
  sdk::ForEachElement<3>(
      x.ndim(), x.shape(), {x.strides(), gy.strides(), channel_stride.data()},
      [&](const std::array<int64_t, 3>& o) {
        const int64_t ch = o[2];
        const double g = gy.LoadFloat(o[1]);
        sum_g[ch] += g;
        sum_gx[ch] +=
            g * (x.LoadFloat(o[0]) - Load1(mean, ch)) * Load1(invstd, ch);
      });
  sdk::ForEachElement<4>(
      x.ndim(), x.shape(),
      {x.strides(), gy.strides(), gx.strides(), channel_stride.data()},
      [&](const std::array<int64_t, 4>& o) {
        const int64_t ch = o[3];
        const double is = Load1(invstd, ch);
        const double w = Load1(weight, ch);
        const double g = gy.LoadFloat(o[1]);
        double v = g * w * is;
        if (attrs->training) {
          const double xhat = (x.LoadFloat(o[0]) - Load1(mean, ch)) * is;
          v = w * is * (g - sum_g[ch] / count - xhat * sum_gx[ch] / count);
        }
        gx.StoreFloat(o[2], static_cast<float>(v));
      });
  for (int64_t ch = 0; ch < c; ++ch) {
    Store1(call.outputs[1], ch, sum_gx[ch]);
    Store1(call.outputs[2], ch, sum_g[ch]);
  }
  return sdk::OkStatus();
}

sdk::Status Embedding(const sdk::KernelCall& call, bool backward) {
  MIXRT_RETURN_IF_ERROR(ExpectArity(call, 2, 2, 1));
  const TensorRef& indices = call.inputs[1];
  const TensorRef& rows = backward ? call.inputs[0] : call.outputs[0];
  const TensorRef& table = backward ? call.outputs[0] : call.inputs[0];
  if (table.ndim() != 2 || indices.dtype() != MIXRT_DTYPE_I64 ||
      rows.ndim() != indices.ndim() + 1) {
    return sdk::InvalidArgumentError(
        "embedding takes weight [V, D], i64 indices and rows [..., D]");
  }
  const int64_t v = table.dim(0), d = table.dim(1);
  int64_t padding = -1;
  if (backward) {
    MIXRT_ASSIGN_OR_RETURN(auto attrs, call.GetAttrs<MixrtEmbeddingAttrs>());
    padding = attrs->padding_idx;
  }
  std::vector<int64_t> idx;
  std::array<int64_t, MIXRT_MAX_DIMS> row_strides{};
  for (int i = 0; i < indices.ndim(); ++i) row_strides[i] = rows.stride(i);
  std::vector<int64_t> row_offsets;
  sdk::ForEachElement<2>(indices.ndim(), indices.shape(),
                         {indices.strides(), row_strides.data()},
                         [&](const std::array<int64_t, 2>& o) {
                           idx.push_back(indices.LoadInt(o[0]));
                           row_offsets.push_back(o[1]);
                         });
  for (size_t i = 0; i < idx.size(); ++i) {
    if (idx[i] < 0 || idx[i] >= v) {
      return sdk::InvalidArgumentError(
          absl::StrCat("embedding: index ", idx[i], " at position ", i,
                       " is out of range [0, ", v, ")"));
    }
  }
  const int64_t rs = rows.stride(rows.ndim() - 1);
  if (!backward) {
    for (size_t i = 0; i < idx.size(); ++i)
      for (int64_t k = 0; k < d; ++k) {
        rows.StoreFloat(
            row_offsets[i] + k * rs,
            table.LoadFloat(idx[i] * table.stride(0) + k * table.stride(1)));
      }
    return sdk::OkStatus();
  }
  std::vector<double> acc(v * d, 0.0);
  for (size_t i = 0; i < idx.size(); ++i) {
    if (idx[i] == padding) continue;
    for (int64_t k = 0; k < d; ++k) {
      acc[idx[i] * d + k] += rows.LoadFloat(row_offsets[i] + k * rs);
    }
  }
  for (int64_t r = 0; r < v; ++r)
    for (int64_t k = 0; k < d; ++k) {
      table.StoreFloat(r * table.stride(0) + k * table.stride(1),
                       static_cast<float>(acc[r * d + k]));
    }
  return sdk::OkStatus();
}

}  // namespace

std::vector<sdk::OpTable::Row> BatchNormEmbeddingOps() {
  return {
      {MIXRT_OP_BATCH_NORM, BatchNorm},
      {MIXRT_OP_BATCH_NORM_BACKWARD, BatchNormBackward},
      {MIXRT_OP_EMBEDDING,
       [](const sdk::KernelCall& call) { return Embedding(call, false); }},
      {MIXRT_OP_EMBEDDING_BACKWARD,
       [](const sdk::KernelCall& call) { return Embedding(call, true); }},
  };
}

}  // namespace mixrt::reference
