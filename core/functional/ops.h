// The differentiable mixrt ops: each applies autocast
// (core/amp/autocast/autocast.h), runs the kernel on the tensors' device, and
// records its backward when an input requires grad. This is the API models are
// written against; core/kernels/ holds the same kernels without autocast or
// autograd (mixrt::kernels).
//
//   mixrt::Tensor h = *mixrt::relu(*mixrt::linear(x, w1, b1));
//   mixrt::Tensor loss = *mixrt::cross_entropy(*mixrt::linear(h, w2, b2), y);
//   MIXRT_RETURN_IF_ERROR(loss.backward());
#ifndef MIXRT_CORE_FUNCTIONAL_OPS_H_
#define MIXRT_CORE_FUNCTIONAL_OPS_H_

#include <optional>
#include <vector>

#include "absl/status/statusor.h"
#include "core/autograd/differentiable_cast.h"
#include "core/kernels/conv2d.h"
#include "core/kernels/loss.h"
#include "core/kernels/matmul.h"
#include "core/kernels/pool2d.h"
#include "core/tensor/generator.h"
#include "core/tensor/tensor.h"

namespace mixrt {

// ---- dtype and shape ----
// cast(x, dtype) lives in core/autograd/differentiable_cast.h: autocast
// needs it below this layer.
absl::StatusOr<Tensor> reshape(const Tensor& x,
                               absl::Span<const int64_t> shape);
absl::StatusOr<Tensor> transpose(const Tensor& x, int64_t dim0, int64_t dim1);
// Views (sharing storage; backward returns dense gradients), as torch.*.
absl::StatusOr<Tensor> permute(const Tensor& x, absl::Span<const int64_t> dims);
absl::StatusOr<Tensor> contiguous(const Tensor& x);
// Elements [start, start + length) of `dim`; a negative start counts from
// the end.
absl::StatusOr<Tensor> narrow(const Tensor& x, int64_t dim, int64_t start,
                              int64_t length);
// Parts of `split_size` along `dim` (the last may be smaller).
absl::StatusOr<std::vector<Tensor>> split(const Tensor& x, int64_t split_size,
                                          int64_t dim = 0);
// ceil(size / chunks) per part, as torch.chunk (maybe fewer than `chunks`).
absl::StatusOr<std::vector<Tensor>> chunk(const Tensor& x, int64_t chunks,
                                          int64_t dim = 0);
absl::StatusOr<Tensor> unsqueeze(const Tensor& x, int64_t dim);
// Joins along `dim` (cat) or a new `dim` (stack). Mixed dtypes join in
// PyTorch's result type (two float kinds: f32); under autocast both are on
// the promote list (the widest input dtype).
absl::StatusOr<Tensor> cat(const std::vector<Tensor>& tensors, int64_t dim = 0);
absl::StatusOr<Tensor> stack(const std::vector<Tensor>& tensors,
                             int64_t dim = 0);
// x with `value` where the bool `mask` (broadcast to x's shape) is true.
absl::StatusOr<Tensor> masked_fill(const Tensor& x, const Tensor& mask,
                                   double value);
// The last two dims' upper (col - row >= diagonal) / lower (<= diagonal)
// triangle, the rest zero.
absl::StatusOr<Tensor> triu(const Tensor& x, int64_t diagonal = 0);
absl::StatusOr<Tensor> tril(const Tensor& x, int64_t diagonal = 0);
// [N, ...] -> [N, prod(...)]
absl::StatusOr<Tensor> flatten(const Tensor& x);

// ---- pointwise (broadcasting) ----
absl::StatusOr<Tensor> add(const Tensor& a, const Tensor& b);
absl::StatusOr<Tensor> sub(const Tensor& a, const Tensor& b);
absl::StatusOr<Tensor> mul(const Tensor& a, const Tensor& b);
absl::StatusOr<Tensor> div(const Tensor& a, const Tensor& b);
absl::StatusOr<Tensor> neg(const Tensor& x);
// alpha * x + beta
absl::StatusOr<Tensor> scale(const Tensor& x, double alpha, double beta = 0);
absl::StatusOr<Tensor> relu(const Tensor& x);
absl::StatusOr<Tensor> leaky_relu(const Tensor& x, double negative_slope);
absl::StatusOr<Tensor> gelu(const Tensor& x, bool tanh_approximation = false);
absl::StatusOr<Tensor> silu(const Tensor& x);
absl::StatusOr<Tensor> sigmoid(const Tensor& x);
absl::StatusOr<Tensor> tanh(const Tensor& x);
absl::StatusOr<Tensor> exp(const Tensor& x);
absl::StatusOr<Tensor> log(const Tensor& x);
absl::StatusOr<Tensor> sqrt(const Tensor& x);
absl::StatusOr<Tensor> pow(const Tensor& x, double exponent);
absl::StatusOr<Tensor> clamp(const Tensor& x, double min, double max);

// ---- reductions ----
absl::StatusOr<Tensor> sum(const Tensor& x, absl::Span<const int64_t> dims = {},
                           bool keepdim = false);
absl::StatusOr<Tensor> mean(const Tensor& x,
                            absl::Span<const int64_t> dims = {},
                            bool keepdim = false);

// ---- linear algebra ----
absl::StatusOr<Tensor> matmul(const Tensor& a, const Tensor& b);
// x [..., in] @ weight[out, in]^T + bias[out] (bias may be undefined).
absl::StatusOr<Tensor> linear(const Tensor& x, const Tensor& weight,
                              const Tensor& bias);

// ---- neural-network ops ----
absl::StatusOr<Tensor> softmax(const Tensor& x, int64_t dim);
absl::StatusOr<Tensor> log_softmax(const Tensor& x, int64_t dim);
absl::StatusOr<Tensor> layer_norm(const Tensor& x, int normalized_dims,
                                  const Tensor& weight, const Tensor& bias,
                                  double eps = 1e-5);
// Which attention implementation runs, as torch.nn.attention.sdpa_kernel:
// kAuto takes the plugin's fused kernel when it has one (O(L + S) extra
// memory), else the math path (matmul, softmax, matmul: O(L * S)).
enum class AttentionBackend { kAuto, kMath, kFused };

// torch.nn.functional.scaled_dot_product_attention's arguments after
// (query, key, value).
struct AttentionOptions {
  Tensor attn_mask;        // bool (true = attend) or additive float; optional.
  double dropout_p = 0;    // On the attention weights (training only).
  bool is_causal = false;  // Query i attends keys j <= i.
  std::optional<double> scale;     // Default 1 / sqrt(E).
  Generator* generator = nullptr;  // For dropout.
  AttentionBackend backend = AttentionBackend::kAuto;
  // Grouped-query attention (torch's enable_gqa): key and value have Hk
  // heads (dim -3), a divisor of the query's Hq; each serves Hq / Hk
  // consecutive query heads.
  bool enable_gqa = false;
};
// softmax(q k^T * scale + mask) v over q [..., L, E], k [..., S, E],
// v [..., S, Ev] -> [..., L, Ev]; leading dims of size 1 broadcast, as
// torch's. On the autocast lower-precision list.
absl::StatusOr<Tensor> scaled_dot_product_attention(
    const Tensor& query, const Tensor& key, const Tensor& value,
    const AttentionOptions& options = {});
// Training-mode dropout (callers skip it in eval mode).
absl::StatusOr<Tensor> dropout(const Tensor& x, double p,
                               Generator* generator = nullptr);
// torch.nn.functional.embedding: rows of `weight` [num_embeddings, D] by
// `indices`. padding_idx as PyTorch's: unset, no padding; a negative value
// counts from the end (-1 is the last row); the padding row gets no
// gradient. Outside [-num_embeddings, num_embeddings) it is an error.
absl::StatusOr<Tensor> embedding(
    const Tensor& weight, const Tensor& indices,
    std::optional<int64_t> padding_idx = std::nullopt);
absl::StatusOr<Tensor> conv2d(const Tensor& x, const Tensor& weight,
                              const Tensor& bias,
                              const Conv2dOptions& options = {});
absl::StatusOr<Tensor> pool2d(const Tensor& x, const Pool2dOptions& options);
// running_mean/var (f32) are updated in place when training.
absl::StatusOr<Tensor> batch_norm(const Tensor& x, const Tensor& weight,
                                  const Tensor& bias,
                                  const Tensor& running_mean,
                                  const Tensor& running_var, bool training,
                                  double momentum = 0.1, double eps = 1e-5);

// ---- losses (f32 under autocast) ----
absl::StatusOr<Tensor> cross_entropy(const Tensor& logits, const Tensor& target,
                                     const CrossEntropyOptions& options = {});
absl::StatusOr<Tensor> nll_loss(const Tensor& log_probs, const Tensor& target,
                                const CrossEntropyOptions& options = {});
absl::StatusOr<Tensor> mse_loss(const Tensor& input, const Tensor& target,
                                Reduction reduction = Reduction::kMean);
absl::StatusOr<Tensor> l1_loss(const Tensor& input, const Tensor& target,
                               Reduction reduction = Reduction::kMean);
absl::StatusOr<Tensor> smooth_l1_loss(const Tensor& input, const Tensor& target,
                                      Reduction reduction = Reduction::kMean,
                                      double beta = 1.0);
absl::StatusOr<Tensor> binary_cross_entropy_with_logits(
    const Tensor& logits, const Tensor& target,
    Reduction reduction = Reduction::kMean);
// Refused under CUDA autocast, as PyTorch refuses it.
absl::StatusOr<Tensor> binary_cross_entropy(
    const Tensor& probs, const Tensor& target,
    Reduction reduction = Reduction::kMean);

// Sums `grad` over the dims broadcasting added or stretched, giving `shape`.
absl::StatusOr<Tensor> SumToShape(const Tensor& grad,
                                  absl::Span<const int64_t> shape);

}  // namespace mixrt

#endif  // MIXRT_CORE_FUNCTIONAL_OPS_H_
