// reduce on dense tensors: sums and means over one contiguous run of axes
// (bias gradients, row sums) in a parallel double-accumulating loop; else
// oneDNN's reduction primitive for f32/bf16 sums, means and extrema, and a
// double-accumulating loop for var, abs_max and f16. oneDNN 2.6 reduces
// [4096, 1536] -> [1, 1536] with its reference implementation, ~78 ms: a
// third of a GPT train step went there.
#include "backends/cpu/kernels/cpu_reduce.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "backends/cpu/kernels/float_rows.h"
#include "backends/cpu/kernels/lane_sums.h"
#include "backends/cpu/kernels/parallel.h"
#include "backends/cpu/onednn/onednn_compat.h"
#include "backends/cpu/onednn/onednn_context.h"
#include "mixrt/status_macros.h"
#include "plugins/sdk/call_decoders.h"
#include "plugins/sdk/reduction_order.h"
#include "plugins/sdk/tensor_ref.h"

namespace mixrt::cpu {
namespace {

using sdk::TensorRef;

bool OneDnnReduces(MixrtReduceKind kind, MixrtDtype dtype) {
  return (dtype == MIXRT_DTYPE_F32 || dtype == MIXRT_DTYPE_BF16) &&
         (kind == MIXRT_REDUCE_SUM || kind == MIXRT_REDUCE_MEAN ||
          kind == MIXRT_REDUCE_MAX || kind == MIXRT_REDUCE_MIN);
}

// False when this oneDNN build and CPU have no such reduction.
bool ReduceOneDnn(MixrtReduceKind kind, const TensorRef& in,
                  const TensorRef& out) {
  const dnnl::algorithm algorithm =
      kind == MIXRT_REDUCE_SUM    ? dnnl::algorithm::reduction_sum
      : kind == MIXRT_REDUCE_MEAN ? dnnl::algorithm::reduction_mean
      : kind == MIXRT_REDUCE_MAX  ? dnnl::algorithm::reduction_max
                                  : dnnl::algorithm::reduction_min;
  const dnnl::memory::desc src = MemoryDesc(in);
  const dnnl::memory::desc dst = MemoryDesc(out);
  auto prim = TryGetPrimitive(
      absl::StrCat("reduce|", kind, "|", DescKey(in), "|", DescKey(out)), [&] {
        const dnnl::reduction::primitive_desc pd =
            ReductionPd(algorithm, src, dst);
        return CachedPrimitive{dnnl::reduction(pd), pd.impl_info_str()};
      });
  if (prim == nullptr) return false;
  prim->primitive.execute(ThreadStream(),
                          {{DNNL_ARG_SRC, Memory(src, in.data())},
                           {DNNL_ARG_DST, Memory(dst, out.data())}});
  ThreadStream().wait();
  return true;
}

// A contiguous input whose reduced axes form one run: [outer, middle,
// inner] with middle reduced. False for any other layout.
struct MiddleView {
  int64_t outer = 1, middle = 1, inner = 1;
};

bool ViewAsMiddle(uint32_t axes_mask, const TensorRef& in, MiddleView* v) {
  if (!in.is_contiguous()) return false;
  int first = -1, last = -1;
  for (int d = 0; d < in.ndim(); ++d) {
    if (((axes_mask >> d) & 1u) == 0) continue;
    if (first < 0) first = d;
    if (last >= 0 && last != d - 1) return false;  // Not one run.
    last = d;
  }
  if (first < 0) return false;
  *v = MiddleView{};
  for (int d = 0; d < in.ndim(); ++d) {
    (d < first ? v->outer : d <= last ? v->middle : v->inner) *= in.dim(d);
  }
  return true;
}

// out[o, i] = sum (or mean) over m of in[o, m, i], accumulated in double:
// blocks of inner columns in parallel, or, when inner is 1, pieces of each
// row (partial sums added in a fixed order: the result does not depend on
// the thread count).
void SumMiddle(const MiddleView& v, bool mean, const TensorRef& in,
               const TensorRef& out) {
  // The reduction order of sdk/reduction_order.h.
  constexpr int64_t kColumns = sdk::element::kReduceColumnBlock;
  constexpr int64_t kPiece = sdk::element::kReducePiece;
  const double divisor = mean ? static_cast<double>(v.middle) : 1.0;
  if (v.inner == 1) {
    const int64_t pieces = (v.middle + kPiece - 1) / kPiece;
    std::vector<double> partial(v.outer * pieces);
    const int64_t grain = GrainFor(std::min(v.middle, kPiece));
    ParallelFor(v.outer * pieces, grain, [&](int64_t begin, int64_t end) {
      float chunk[kColumns];
      for (int64_t task = begin; task < end; ++task) {
        const int64_t o = task / pieces, p0 = (task % pieces) * kPiece;
        const int64_t p1 = std::min(v.middle, p0 + kPiece);
        double sum = 0;
        for (int64_t m0 = p0; m0 < p1; m0 += kColumns) {
          const int64_t n = std::min(kColumns, p1 - m0);
          sum += sdk::element::mx_sum_in_double(
              FloatsAt(in.data(), in.dtype(), o * v.middle + m0, n, chunk), n);
        }
        partial[task] = sum;
      }
    });
    for (int64_t o = 0; o < v.outer; ++o) {
      double sum = 0;
      for (int64_t p = 0; p < pieces; ++p) sum += partial[o * pieces + p];
      const float result = static_cast<float>(sum / divisor);
      StoreRow(&result, 1, out.data(), out.dtype(), o);
    }
    return;
  }
  const int64_t blocks = (v.inner + kColumns - 1) / kColumns;
  const int64_t grain = GrainFor(v.middle * std::min(kColumns, v.inner));
  // On the stack, f32 rows read in place: vectors allocated per call and
  // rows copied first made a [32, 64] bias gradient take 0.9 us.
  ParallelFor(v.outer * blocks, grain, [&](int64_t begin, int64_t end) {
    float row[kColumns], result[kColumns];
    double acc[kColumns];
    for (int64_t task = begin; task < end; ++task) {
      const int64_t o = task / blocks, c0 = (task % blocks) * kColumns;
      const int64_t n = std::min(kColumns, v.inner - c0);
      std::fill(acc, acc + n, 0.0);
      for (int64_t m = 0; m < v.middle; ++m) {
        const float* values = FloatsAt(
            in.data(), in.dtype(), (o * v.middle + m) * v.inner + c0, n, row);
        for (int64_t j = 0; j < n; ++j) acc[j] += values[j];
      }
      for (int64_t j = 0; j < n; ++j) {
        result[j] = static_cast<float>(acc[j] / divisor);
      }
      StoreRow(result, n, out.data(), out.dtype(), o * v.inner + c0);
    }
  });
}

// Accumulates in double into one slot per output element.
void ReduceLoop(const MixrtReduceAttrs& a, const TensorRef& in,
                const TensorRef& out) {
  const auto kind = static_cast<MixrtReduceKind>(a.kind);
  std::array<int64_t, MIXRT_MAX_DIMS> acc_strides{};
  int64_t stride = 1, group = 1;
  for (int d = in.ndim() - 1; d >= 0; --d) {
    const bool reduced = (a.axes_mask >> d) & 1u;
    acc_strides[d] = reduced ? 0 : stride;
    if (reduced) {
      group *= in.dim(d);
    } else {
      stride *= in.dim(d);
    }
  }
  const int64_t n_out = out.numel();
  const double inf = std::numeric_limits<double>::infinity();
  std::vector<double> acc(n_out, kind == MIXRT_REDUCE_MAX   ? -inf
                                 : kind == MIXRT_REDUCE_MIN ? inf
                                                            : 0.0);
  std::vector<double> mean;
  std::vector<float> values(in.numel());
  LoadRow(in.data(), in.dtype(), 0, in.numel(), values.data());
  auto for_each = [&](auto&& fn) {
    sdk::ForEachElement<2>(in.ndim(), in.shape(),
                           {in.strides(), acc_strides.data()},
                           [&](const std::array<int64_t, 2>& o) {
                             fn(o[1], static_cast<double>(values[o[0]]));
                           });
  };
  if (kind == MIXRT_REDUCE_VAR) {
    mean.assign(n_out, 0.0);
    for_each([&](int64_t i, double v) { mean[i] += v; });
    for (double& m : mean) m /= static_cast<double>(group);
  }
  for_each([&](int64_t i, double v) {
    double& r = acc[i];
    switch (kind) {
      case MIXRT_REDUCE_SUM:
      case MIXRT_REDUCE_MEAN:
        r += v;
        break;
      case MIXRT_REDUCE_MAX:
        r = (v != v || r != r) ? v + r : std::max(r, v);
        break;
      case MIXRT_REDUCE_MIN:
        r = (v != v || r != r) ? v + r : std::min(r, v);
        break;
      case MIXRT_REDUCE_ABS_MAX:
        r = (v != v || r != r) ? v + r : std::max(r, std::fabs(v));
        break;
      default:
        r += (v - mean[i]) * (v - mean[i]);
        break;
    }
  });
  std::vector<float> result(n_out);
  for (int64_t i = 0; i < n_out; ++i) {
    double r = acc[i];
    if (kind == MIXRT_REDUCE_MEAN) r /= static_cast<double>(group);
    if (kind == MIXRT_REDUCE_VAR) {
      const double dof = static_cast<double>(group) - a.correction;
      r = dof > 0 ? r / dof : std::nan("");
    }
    result[i] = static_cast<float>(r);
  }
  StoreRow(result.data(), n_out, out.data(), out.dtype(), 0);
}

}  // namespace

absl::Status RunReduce(const sdk::KernelCall& call) {
  if (call.inputs.size() != 1 || call.outputs.size() != 1) {
    return absl::InvalidArgumentError("reduce takes one input and one output");
  }
  MIXRT_ASSIGN_OR_RETURN(auto attrs, call.GetAttrs<MixrtReduceAttrs>());
  const MixrtReduceAttrs a = *attrs;
  const TensorRef& in = call.inputs[0];
  const TensorRef& out = call.outputs[0];
  if (a.kind >= MIXRT_REDUCE_COUNT) {
    return absl::UnimplementedError(absl::StrCat("reduce kind ", a.kind));
  }
  // The output: the input's dtype or f32 (plugin_api.h); every path below
  // accumulates in f32 or double and stores in the output's dtype.
  if (!sdk::IsFloatingDtype(in.dtype()) ||
      (out.dtype() != in.dtype() && out.dtype() != MIXRT_DTYPE_F32) ||
      in.ndim() != out.ndim()) {
    return absl::InvalidArgumentError(
        "reduce needs a floating input and an output of its rank, in its "
        "dtype or f32");
  }
  int64_t group = 1;
  for (int d = 0; d < in.ndim(); ++d) {
    const bool reduced = (a.axes_mask >> d) & 1u;
    if (out.dim(d) != (reduced ? 1 : in.dim(d))) {
      return absl::InvalidArgumentError(
          absl::StrCat("reduce: output dim ", d, " has the wrong size"));
    }
    if (reduced) group *= in.dim(d);
  }
  const auto kind = static_cast<MixrtReduceKind>(a.kind);
  MiddleView view;
  if (group > 0 && (kind == MIXRT_REDUCE_SUM || kind == MIXRT_REDUCE_MEAN) &&
      ViewAsMiddle(a.axes_mask, in, &view)) {
    SumMiddle(view, kind == MIXRT_REDUCE_MEAN, in, out);
    return absl::OkStatus();
  }
  if (group == 0) {
    if (kind != MIXRT_REDUCE_SUM && kind != MIXRT_REDUCE_MEAN &&
        kind != MIXRT_REDUCE_VAR) {
      return absl::InvalidArgumentError(
          "max/min/abs_max of an empty set of elements is undefined");
    }
  } else if (group > 1 && in.dtype() == out.dtype() &&
             OneDnnReduces(kind, in.dtype()) && ReduceOneDnn(kind, in, out)) {
    return absl::OkStatus();
  }
  ReduceLoop(a, in, out);
  return absl::OkStatus();
}

absl::Status RunMultiTensorNorm(const sdk::KernelCall& call) {
  MIXRT_RETURN_IF_ERROR(sdk::ExpectMultiTensorNorm(call));
  // Fixed blocks over all tensors, one partial each, summed in block order:
  // the result does not depend on the thread count.
  constexpr int64_t kBlock = 16 * 1024;
  struct Block {
    const TensorRef* tensor;
    int64_t start, count;
  };
  std::vector<Block> blocks;
  for (const TensorRef& t : call.inputs) {
    for (int64_t s = 0; s < t.numel(); s += kBlock) {
      blocks.push_back({&t, s, std::min(kBlock, t.numel() - s)});
    }
  }
  std::vector<double> partials(blocks.size());
  ParallelFor(static_cast<int64_t>(blocks.size()), 1,
              [&](int64_t begin, int64_t end) {
                std::vector<float> row(kBlock);
                for (int64_t b = begin; b < end; ++b) {
                  const Block& k = blocks[b];
                  LoadRow(k.tensor->data(), k.tensor->dtype(), k.start, k.count,
                          row.data());
                  const float* v = row.data();
                  partials[b] = SumInLanes(k.count, [v](int64_t i) {
                    const double x = v[i];
                    return x * x;
                  });
                }
              });
  double total = 0;
  for (double p : partials) total += p;
  call.outputs[0].StoreFloat(0, static_cast<float>(std::sqrt(total)));
  return absl::OkStatus();
}

}  // namespace mixrt::cpu
