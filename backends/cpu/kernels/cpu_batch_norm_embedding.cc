// batch_norm (parallel over channels, double sums) and embedding (parallel
// over looked-up rows; the backward scatter-add runs per table row). Batch
// norm is not oneDNN's: the running statistics (with PyTorch's unbiased
// variance) are the plugin's to update either way, and oneDNN 2.6.3 offers
// only its simple implementation for the plain layouts used here.
#include "backends/cpu/kernels/cpu_batch_norm_embedding.h"

#include <cmath>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "backends/cpu/kernels/float_rows.h"
#include "backends/cpu/kernels/parallel.h"
#include "mixrt/status_macros.h"
#include "plugins/sdk/tensor_ref.h"

namespace mixrt::cpu {
namespace {

using sdk::TensorRef;

// Dense x [N, C, S...] seen as N blocks of C planes of `plane` elements.
struct Layout {
  int64_t n, c, plane;
};

Layout Of(const TensorRef& x) {
  Layout l{x.dim(0), x.dim(1), 1};
  for (int d = 2; d < x.ndim(); ++d) l.plane *= x.dim(d);
  return l;
}

float* F32(const TensorRef& t) { return static_cast<float*>(t.data()); }

absl::Status BatchNorm(const sdk::KernelCall& call) {
  if (call.inputs.size() != 3 || call.outputs.size() != 5) {
    return absl::InvalidArgumentError("batch_norm: wrong number of tensors");
  }
  MIXRT_ASSIGN_OR_RETURN(auto attrs, call.GetAttrs<MixrtBatchNormAttrs>());
  const MixrtBatchNormAttrs a = *attrs;
  const TensorRef& x = call.inputs[0];
  const Layout l = Of(x);
  const int64_t count = l.n * l.plane;
  if (a.training && count < 2) {
    return absl::InvalidArgumentError(
        "batch_norm: training needs more than one value per channel");
  }
  std::vector<float> w(l.c), b(l.c);
  LoadRow(call.inputs[1].data(), call.inputs[1].dtype(), 0, l.c, w.data());
  LoadRow(call.inputs[2].data(), call.inputs[2].dtype(), 0, l.c, b.data());
  float* save_mean = F32(call.outputs[1]);
  float* save_invstd = F32(call.outputs[2]);
  float* running_mean = F32(call.outputs[3]);
  float* running_var = F32(call.outputs[4]);
  const TensorRef& y = call.outputs[0];
  ParallelFor(l.c, GrainFor(l.n * l.plane), [&](int64_t begin, int64_t end) {
    std::vector<float> row(l.plane);
    for (int64_t ch = begin; ch < end; ++ch) {
      double mean = running_mean[ch], var = running_var[ch];
      if (a.training) {
        double s = 0, sq = 0;
        for (int64_t i = 0; i < l.n; ++i) {
          LoadRow(x.data(), x.dtype(), (i * l.c + ch) * l.plane, l.plane,
                  row.data());
          for (float v : row) s += v;
        }
        mean = s / count;
        for (int64_t i = 0; i < l.n; ++i) {
          LoadRow(x.data(), x.dtype(), (i * l.c + ch) * l.plane, l.plane,
                  row.data());
          for (float v : row) sq += (v - mean) * (v - mean);
        }
        var = sq / count;
        running_mean[ch] = static_cast<float>(
            (1 - a.momentum) * running_mean[ch] + a.momentum * mean);
        running_var[ch] = static_cast<float>(
            (1 - a.momentum) * running_var[ch] + a.momentum * sq / (count - 1));
      }
      const auto m = static_cast<float>(mean);
      const auto is = static_cast<float>(1.0 / std::sqrt(var + a.eps));
      save_mean[ch] = m;
      save_invstd[ch] = is;
      for (int64_t i = 0; i < l.n; ++i) {
        const int64_t off = (i * l.c + ch) * l.plane;
        LoadRow(x.data(), x.dtype(), off, l.plane, row.data());
        for (float& v : row) v = (v - m) * is * w[ch] + b[ch];
        StoreRow(row.data(), l.plane, y.data(), y.dtype(), off);
      }
    }
  });
  return absl::OkStatus();
}

absl::Status BatchNormBackward(const sdk::KernelCall& call) {
  if (call.inputs.size() != 5 || call.outputs.size() != 3) {
    return absl::InvalidArgumentError(
        "batch_norm_backward: wrong number of tensors");
  }
  MIXRT_ASSIGN_OR_RETURN(auto attrs, call.GetAttrs<MixrtBatchNormAttrs>());
  const bool training = attrs->training != 0;
  const TensorRef& gy = call.inputs[0];
  const TensorRef& x = call.inputs[1];
  const Layout l = Of(x);
  const int64_t count = l.n * l.plane;
  std::vector<float> w(l.c), gw(l.c), gb(l.c);
  LoadRow(call.inputs[2].data(), call.inputs[2].dtype(), 0, l.c, w.data());
  const float* mean = F32(call.inputs[3]);
  const float* invstd = F32(call.inputs[4]);
  const TensorRef& gx = call.outputs[0];
  ParallelFor(l.c, GrainFor(l.n * l.plane), [&](int64_t begin, int64_t end) {
    std::vector<float> g(l.plane), xr(l.plane);
    for (int64_t ch = begin; ch < end; ++ch) {
      double sum_g = 0, sum_gx = 0;
      for (int64_t i = 0; i < l.n; ++i) {
        const int64_t off = (i * l.c + ch) * l.plane;
        LoadRow(gy.data(), gy.dtype(), off, l.plane, g.data());
        LoadRow(x.data(), x.dtype(), off, l.plane, xr.data());
        for (int64_t k = 0; k < l.plane; ++k) {
          sum_g += g[k];
          sum_gx += g[k] * (xr[k] - mean[ch]) * invstd[ch];
        }
      }
      gw[ch] = static_cast<float>(sum_gx);
      gb[ch] = static_cast<float>(sum_g);
      const float scale = w[ch] * invstd[ch];
      const auto mg = static_cast<float>(sum_g / count);
      const auto mgx = static_cast<float>(sum_gx / count);
      for (int64_t i = 0; i < l.n; ++i) {
        const int64_t off = (i * l.c + ch) * l.plane;
        LoadRow(gy.data(), gy.dtype(), off, l.plane, g.data());
        LoadRow(x.data(), x.dtype(), off, l.plane, xr.data());
        for (int64_t k = 0; k < l.plane; ++k) {
          const float xhat = (xr[k] - mean[ch]) * invstd[ch];
          g[k] = training ? scale * (g[k] - mg - xhat * mgx) : scale * g[k];
        }
        StoreRow(g.data(), l.plane, gx.data(), gx.dtype(), off);
      }
    }
  });
  StoreRow(gw.data(), l.c, call.outputs[1].data(), call.outputs[1].dtype(), 0);
  StoreRow(gb.data(), l.c, call.outputs[2].data(), call.outputs[2].dtype(), 0);
  return absl::OkStatus();
}

absl::Status Embedding(const sdk::KernelCall& call, bool backward) {
  if (call.inputs.size() != 2 || call.outputs.size() != 1) {
    return absl::InvalidArgumentError("embedding: wrong number of tensors");
  }
  const TensorRef& indices = call.inputs[1];
  const TensorRef& rows = backward ? call.inputs[0] : call.outputs[0];
  const TensorRef& table = backward ? call.outputs[0] : call.inputs[0];
  if (table.ndim() != 2 || indices.dtype() != MIXRT_DTYPE_I64) {
    return absl::InvalidArgumentError(
        "embedding takes weight [V, D] and i64 indices");
  }
  const int64_t v = table.dim(0), d = table.dim(1), n = indices.numel();
  const auto* idx = static_cast<const int64_t*>(indices.data());
  for (int64_t i = 0; i < n; ++i) {
    if (idx[i] < 0 || idx[i] >= v) {
      return absl::InvalidArgumentError(
          absl::StrCat("embedding: index ", idx[i], " at position ", i,
                       " is out of range [0, ", v, ")"));
    }
  }
  if (!backward) {
    ParallelFor(n, 64, [&](int64_t begin, int64_t end) {
      std::vector<float> row(d);
      for (int64_t i = begin; i < end; ++i) {
        LoadRow(table.data(), table.dtype(), idx[i] * d, d, row.data());
        StoreRow(row.data(), d, rows.data(), rows.dtype(), i * d);
      }
    });
    return absl::OkStatus();
  }
  MIXRT_ASSIGN_OR_RETURN(auto attrs, call.GetAttrs<MixrtEmbeddingAttrs>());
  const int64_t padding = attrs->padding_idx;
  // Bucket positions by table row so each thread owns whole rows.
  std::vector<std::vector<int64_t>> by_row(v);
  for (int64_t i = 0; i < n; ++i) {
    if (idx[i] != padding) by_row[idx[i]].push_back(i);
  }
  ParallelFor(v, 64, [&](int64_t begin, int64_t end) {
    std::vector<float> acc(d), row(d);
    for (int64_t r = begin; r < end; ++r) {
      std::fill(acc.begin(), acc.end(), 0.0f);
      for (int64_t i : by_row[r]) {
        LoadRow(rows.data(), rows.dtype(), i * d, d, row.data());
        for (int64_t k = 0; k < d; ++k) acc[k] += row[k];
      }
      StoreRow(acc.data(), d, table.data(), table.dtype(), r * d);
    }
  });
  return absl::OkStatus();
}

}  // namespace

absl::Status RunBatchNorm(const sdk::KernelCall& call) {
  return BatchNorm(call);
}

absl::Status RunBatchNormBackward(const sdk::KernelCall& call) {
  return BatchNormBackward(call);
}

absl::Status RunEmbedding(const sdk::KernelCall& call) {
  return Embedding(call, /*backward=*/false);
}

absl::Status RunEmbeddingBackward(const sdk::KernelCall& call) {
  return Embedding(call, /*backward=*/true);
}

}  // namespace mixrt::cpu
