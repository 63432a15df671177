// scaled_dot_product_attention, as PyTorch's math path
// (torch.nn.functional.scaled_dot_product_attention's documented
// reference): softmax(q k^T * scale + bias) v, with the bias from a causal
// or given mask, and dropout on the attention weights. Every step is a
// differentiable op, so autograd needs nothing special; a fused kernel from
// the backend plugins replaces it where one exists.
#include <cmath>
#include <optional>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "core/amp/autocast/autocast.h"
#include "core/autograd/function_node.h"
#include "core/functional/ops.h"
#include "core/kernels/attention.h"
#include "core/kernels/pointwise.h"
#include "core/kernels/reduce.h"
#include "core/tensor/factories.h"
#include "mixrt/status_macros.h"

namespace mixrt {
namespace {

absl::Status CheckAttentionShapes(const Tensor& q, const Tensor& k,
                                  const Tensor& v) {
  for (const Tensor* t : {&q, &k, &v}) {
    MIXRT_RETURN_IF_ERROR(CheckDefined(*t, "scaled_dot_product_attention"));
  }
  const auto shapes = [&] {
    return absl::StrCat("query ", ShapeToString(q.shape()), ", key ",
                        ShapeToString(k.shape()), ", value ",
                        ShapeToString(v.shape()));
  };
  if (q.ndim() < 2 || k.ndim() != q.ndim() || v.ndim() != q.ndim()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "scaled_dot_product_attention: ", shapes(),
        "; expected [..., L, E], [..., S, E] and [..., S, Ev] of one rank"));
  }
  const int n = q.ndim();
  bool ok = q.shape()[n - 1] == k.shape()[n - 1] &&
            k.shape()[n - 2] == v.shape()[n - 2];
  for (int d = 0; ok && d < n - 2; ++d) {
    ok = q.shape()[d] == k.shape()[d] && q.shape()[d] == v.shape()[d];
  }
  if (!ok) {
    return absl::InvalidArgumentError(absl::StrCat(
        "scaled_dot_product_attention: ", shapes(),
        "; query and key must share E, key and value S, and every leading "
        "dim (or have it 1, to broadcast)"));
  }
  return absl::OkStatus();
}

// x broadcast to `shape` through a differentiable product with ones (its
// gradient sums back over the broadcast dims; x * 1 keeps every bit, -0
// and NaN included).
absl::StatusOr<Tensor> BroadcastTo(const Tensor& x, const Shape& shape) {
  if (x.shape() == shape) return x;
  MIXRT_ASSIGN_OR_RETURN(Tensor one, ones(shape, x.dtype(), x.device()));
  return mul(x, one);
}

// Key and value heads repeated for grouped-query attention, then every
// leading dim of size 1 broadcast to the others' (torch's enable_gqa and
// batch broadcasting), so the kernels see q, k and v of one batch shape.
absl::StatusOr<std::vector<Tensor>> BroadcastAttentionInputs(const Tensor& q,
                                                             const Tensor& k,
                                                             const Tensor& v,
                                                             bool enable_gqa) {
  const int n = q.ndim();
  if (n < 2 || k.ndim() != n || v.ndim() != n)
    return std::vector<Tensor>{q, k, v};
  std::vector<Tensor> kv = {k, v};
  if (enable_gqa && n >= 3) {
    const int64_t hq = q.shape()[n - 3], hk = k.shape()[n - 3];
    if (hk < 1 || v.shape()[n - 3] != hk || hq % hk != 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "scaled_dot_product_attention: enable_gqa with query ", hq,
          " heads, key ", hk, " and value ", v.shape()[n - 3],
          "; expected key and value heads equal and dividing the query's"));
    }
    for (Tensor& t : kv) {
      if (hk == hq) break;
      // [..., Hk, S, E] -> [..., Hk, g, S, E] -> [..., Hq, S, E]: head h
      // serves query heads h g .. h g + g - 1 (repeat_interleave).
      MIXRT_ASSIGN_OR_RETURN(Tensor one_more, unsqueeze(t, n - 2));
      Shape grouped = one_more.shape();
      grouped[n - 2] = hq / hk;
      MIXRT_ASSIGN_OR_RETURN(Tensor repeated, BroadcastTo(one_more, grouped));
      Shape heads = t.shape();
      heads[n - 3] = hq;
      MIXRT_ASSIGN_OR_RETURN(t, reshape(repeated, heads));
    }
  }
  std::vector<Tensor> all = {q, kv[0], kv[1]};
  Shape batch(n - 2, 1);
  for (int d = 0; d < n - 2; ++d) {
    for (const Tensor& t : all) {
      const int64_t size = t.shape()[d];
      if (size == 1 || size == batch[d]) continue;
      if (batch[d] != 1) return all;  // Mismatched: the shape check says so.
      batch[d] = size;
    }
  }
  for (Tensor& t : all) {
    Shape target = batch;
    target.push_back(t.shape()[n - 2]);
    target.push_back(t.shape()[n - 1]);
    MIXRT_ASSIGN_OR_RETURN(t, BroadcastTo(t, target));
  }
  return all;
}

// The additive bias: 0 where attending, -inf where masked. A bool mask
// attends where true; a float mask is added as it is.
absl::StatusOr<Tensor> AttentionBias(const Tensor& mask, bool is_causal,
                                     int64_t l, int64_t s, DType dtype,
                                     const Device& device) {
  MIXRT_ASSIGN_OR_RETURN(Tensor zero, zeros({1}, dtype, device));
  MIXRT_ASSIGN_OR_RETURN(Tensor minus_inf, full({1}, -INFINITY, dtype, device));
  if (is_causal) {
    // Query i sees keys j <= i (top-left aligned, as PyTorch's tril).
    MIXRT_ASSIGN_OR_RETURN(Tensor all, ones({l, s}, dtype, device));
    MIXRT_ASSIGN_OR_RETURN(Tensor lower, tril(all, 0));
    MIXRT_ASSIGN_OR_RETURN(Tensor keep, kernels::gt(lower, zero));
    return kernels::where(keep, zero, minus_inf);
  }
  if (mask.dtype() == DType::kBool) {
    return kernels::where(mask, zero, minus_inf);
  }
  return mask;
}

// PyTorch's _safe_softmax over the last dim: a row whose scores are all
// -inf (a query every key is masked from) gets weights 0, not NaN, as the
// fused kernels give, so its gradients are 0 too. Those rows' scores are
// made 0 before the softmax (its backward then multiplies finite weights
// by the zero gradient the second `where` passes) and their weights 0
// after.
absl::StatusOr<Tensor> SafeSoftmax(const Tensor& scores) {
  const int64_t last = scores.ndim() - 1;
  MIXRT_ASSIGN_OR_RETURN(
      Tensor row_max, kernels::amax(scores.detach(), {last}, /*keepdim=*/true));
  MIXRT_ASSIGN_OR_RETURN(Tensor minus_inf,
                         full({1}, -INFINITY, scores.dtype(), scores.device()));
  MIXRT_ASSIGN_OR_RETURN(Tensor masked_row, kernels::eq(row_max, minus_inf));
  MIXRT_ASSIGN_OR_RETURN(Tensor finite, masked_fill(scores, masked_row, 0.0));
  MIXRT_ASSIGN_OR_RETURN(Tensor weights, softmax(finite, last));
  return masked_fill(weights, masked_row, 0.0);
}

// The plugin's fused kernel, with its backward recorded; Unimplemented when
// the plugin has none.
absl::StatusOr<Tensor> FusedAttention(const Tensor& q, const Tensor& k,
                                      const Tensor& v,
                                      const AttentionOptions& options,
                                      double scale) {
  kernels::FusedAttentionArgs args;
  args.mask = options.attn_mask;
  args.scale = scale;
  args.is_causal = options.is_causal;
  args.dropout_p = options.dropout_p;
  if (args.dropout_p > 0) {
    Generator* gen =
        options.generator != nullptr ? options.generator : &DefaultGenerator();
    int64_t weights = k.shape()[k.ndim() - 2];
    for (int d = 0; d < q.ndim() - 1; ++d) weights *= q.shape()[d];
    const Draw draw = ReserveBlocks(gen->state(), PhiloxBlocks(weights));
    args.seed = draw.seed;
    args.offset = draw.offset;
  }
  // Dense q, k, v go to the kernel and are what backward keeps: the heads
  // of a packed projection are strided views, which the backward would
  // otherwise copy into dense ones a second time.
  MIXRT_ASSIGN_OR_RETURN(const Tensor qc, q.detach().contiguous());
  MIXRT_ASSIGN_OR_RETURN(const Tensor kc, k.detach().contiguous());
  MIXRT_ASSIGN_OR_RETURN(const Tensor vc, v.detach().contiguous());
  MIXRT_ASSIGN_OR_RETURN(
      kernels::FusedAttentionOutput fwd,
      kernels::scaled_dot_product_attention(qc, kc, vc, args));
  Tensor y = fwd.out;
  // The output is saved for the backward (its D_i = rowsum(dO * O)).
  kernels::FusedAttentionOutput saved_fwd{fwd.out.detach(), fwd.lse,
                                          fwd.grouped_mask};
  Record(
      "ScaledDotProductAttentionBackward", {q, k, v}, {&y}, {qc, kc, vc},
      [args, saved_fwd](
          const std::vector<Tensor>& g,
          const std::vector<Tensor>& s) -> absl::StatusOr<std::vector<Tensor>> {
        return kernels::scaled_dot_product_attention_backward(
            g[0], s[0], s[1], s[2], saved_fwd, args);
      });
  return y;
}

}  // namespace

absl::StatusOr<Tensor> scaled_dot_product_attention(
    const Tensor& query_in, const Tensor& key_in, const Tensor& value_in,
    const AttentionOptions& options) {
  // Undefined inputs pass through as they are; the shape check names them.
  MIXRT_ASSIGN_OR_RETURN(
      const std::vector<Tensor> qkv,
      BroadcastAttentionInputs(query_in, key_in, value_in, options.enable_gqa));
  const Tensor &query = qkv[0], &key = qkv[1], &value = qkv[2];
  MIXRT_RETURN_IF_ERROR(CheckAttentionShapes(query, key, value));
  if (options.is_causal && options.attn_mask.defined()) {
    return absl::InvalidArgumentError(
        "scaled_dot_product_attention: Explicit attn_mask should not be set "
        "when is_causal=True");
  }
  if (options.attn_mask.defined() &&
      options.attn_mask.dtype() != DType::kBool &&
      !IsFloating(options.attn_mask.dtype())) {
    return absl::InvalidArgumentError(
        absl::StrCat("scaled_dot_product_attention: attn_mask is ",
                     DTypeName(options.attn_mask.dtype()),
                     "; expected bool or a floating additive mask"));
  }
  if (!(options.dropout_p >= 0 && options.dropout_p <= 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("scaled_dot_product_attention: dropout_p is ",
                     options.dropout_p, "; expected 0 <= dropout_p <= 1"));
  }
  // dropout_p = 1 drops every weight (PyTorch: zeros, zero gradients): the
  // math path's dropout multiplies by 0, where a fused kernel would scale
  // the kept weights by 1 / (1 - p).
  const bool drops_all = options.dropout_p == 1;
  if (drops_all && options.backend == AttentionBackend::kFused) {
    return absl::InvalidArgumentError(
        "scaled_dot_product_attention: dropout_p = 1 drops every weight and "
        "runs on the math path; the fused backend was asked for");
  }
  // On PyTorch's lower-precision lists (CPU and CUDA): q, k and v run in
  // the autocast dtype.
  MIXRT_ASSIGN_OR_RETURN(
      std::vector<Tensor> in,
      AutocastInputs("scaled_dot_product_attention", MIXRT_OP_CLASS_MATMUL,
                     {query, key, value}));
  const Tensor &q = in[0], &k = in[1], &v = in[2];
  const int n = q.ndim();
  const int64_t l = q.shape()[n - 2], s = k.shape()[n - 2];
  if (q.shape()[n - 1] == 0) {
    // 1/sqrt(0) is inf and 0 * inf NaN: no answer two paths could agree on.
    return absl::InvalidArgumentError(
        absl::StrCat("scaled_dot_product_attention: query and key have no "
                     "features (E = 0, query ",
                     ShapeToString(q.shape()), "); expected E >= 1"));
  }
  const double scale = options.scale.value_or(
      1.0 / std::sqrt(static_cast<double>(q.shape()[n - 1])));
  // No query: an empty result; no key: a query attends nothing and gets
  // zeros (as a fully masked one does). The math path gives both on every
  // backend, so the result does not depend on which kernel exists.
  const bool empty = l == 0 || s == 0;
  if (options.backend != AttentionBackend::kMath && !empty && !drops_all) {
    absl::StatusOr<Tensor> fused = FusedAttention(q, k, v, options, scale);
    if (fused.ok() || !absl::IsUnimplemented(fused.status()) ||
        options.backend == AttentionBackend::kFused) {
      return fused;
    }
  }
  MIXRT_ASSIGN_OR_RETURN(Tensor kt, transpose(k, n - 2, n - 1));
  MIXRT_ASSIGN_OR_RETURN(Tensor scores, matmul(q, kt));
  MIXRT_ASSIGN_OR_RETURN(scores, mixrt::scale(scores, scale));
  if (!empty && (options.is_causal || options.attn_mask.defined())) {
    MIXRT_ASSIGN_OR_RETURN(
        Tensor bias, AttentionBias(options.attn_mask, options.is_causal, l, s,
                                   scores.dtype(), scores.device()));
    MIXRT_ASSIGN_OR_RETURN(scores, add(scores, bias));
  }
  MIXRT_ASSIGN_OR_RETURN(Tensor weights, options.attn_mask.defined() && !empty
                                             ? SafeSoftmax(scores)
                                             : softmax(scores, -1));
  if (options.dropout_p > 0) {
    MIXRT_ASSIGN_OR_RETURN(
        weights, dropout(weights, options.dropout_p, options.generator));
  }
  if (weights.dtype() != v.dtype()) {
    MIXRT_ASSIGN_OR_RETURN(weights, cast(weights, v.dtype()));
  }
  return matmul(weights, v);
}

}  // namespace mixrt
