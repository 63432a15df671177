#include "core/nn/transformer.h"

#include <cmath>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "core/autograd/grad_mode.h"
#include "core/functional/checkpoint.h"
#include "core/functional/ops.h"
#include "core/kernels/fill_copy.h"
#include "core/kernels/pointwise.h"
#include "core/tensor/factories.h"
#include "mixrt/status_macros.h"

namespace mixrt::nn {
namespace {

absl::StatusOr<Tensor> Trainable(absl::StatusOr<Tensor> t) {
  if (!t.ok()) return t.status();
  MIXRT_RETURN_IF_ERROR(t->set_requires_grad(true));
  return t;
}

absl::StatusOr<Tensor> MaybeDropout(const Tensor& x, double p, bool training,
                                    Generator* generator) {
  if (!training || p == 0) return x;
  return dropout(x, p, generator);
}

}  // namespace

absl::StatusOr<std::shared_ptr<MultiheadAttention>> MultiheadAttention::Create(
    int64_t embed_dim, int64_t num_heads, const Device& device,
    Generator* generator, double dropout, bool is_causal) {
  if (embed_dim < 1 || num_heads < 1 || embed_dim % num_heads != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("MultiheadAttention: embed_dim ", embed_dim,
                     " must be a positive multiple of num_heads ", num_heads));
  }
  if (!(dropout >= 0 && dropout <= 1)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "MultiheadAttention: dropout is ", dropout, "; expected [0, 1]"));
  }
  std::shared_ptr<MultiheadAttention> m(new MultiheadAttention());
  m->heads_ = num_heads;
  m->dropout_ = dropout;
  m->causal_ = is_causal;
  m->generator_ = generator ? generator->Share() : nullptr;
  // As torch.nn.MultiheadAttention: xavier_uniform_ on the stacked [3E, E]
  // projection, zero biases, out_proj a Linear with a zero bias.
  const double bound = std::sqrt(6.0 / static_cast<double>(4 * embed_dim));
  MIXRT_ASSIGN_OR_RETURN(
      Tensor w, Trainable(rand({3 * embed_dim, embed_dim}, DType::kF32, device,
                               -bound, bound, generator)));
  m->in_proj_weight_ = m->register_parameter("in_proj_weight", w);
  MIXRT_ASSIGN_OR_RETURN(
      Tensor b, Trainable(zeros({3 * embed_dim}, DType::kF32, device)));
  m->in_proj_bias_ = m->register_parameter("in_proj_bias", b);
  MIXRT_ASSIGN_OR_RETURN(
      m->out_proj_, Linear::Create(embed_dim, embed_dim, device, generator));
  for (auto& [name, p] : m->out_proj_->named_parameters()) {
    if (name == "bias") MIXRT_RETURN_IF_ERROR(kernels::fill_(p, 0));
  }
  m->register_module("out_proj", m->out_proj_);
  return m;
}

absl::StatusOr<Tensor> MultiheadAttention::forward(const Tensor& x) {
  if (x.ndim() != 3 || x.shape()[2] != in_proj_weight_.shape()[1]) {
    return absl::InvalidArgumentError(absl::StrCat(
        "MultiheadAttention: input is ", ShapeToString(x.shape()),
        "; expected [batch, sequence, ", in_proj_weight_.shape()[1], "]"));
  }
  MultiheadAttentionForwardOptions options;
  options.need_weights = false;
  MIXRT_ASSIGN_OR_RETURN(MultiheadAttentionOutput out,
                         forward(x, x, x, options));
  return out.output;
}

absl::StatusOr<std::vector<Tensor>> MultiheadAttention::ProjectHeads(
    const Tensor& query, const Tensor& key, const Tensor& value) const {
  const int64_t e = in_proj_weight_.shape()[1], d = e / heads_;
  const int64_t b = query.shape()[0], l = query.shape()[1];
  std::vector<Tensor> heads;
  if (query.is_same(key) && key.is_same(value)) {
    // Self-attention: one GEMM with the stacked projection.
    // [B, T, 3E] -> [B, T, 3, H, D] -> [3, B, H, T, D]
    MIXRT_ASSIGN_OR_RETURN(Tensor qkv,
                           linear(query, in_proj_weight_, in_proj_bias_));
    MIXRT_ASSIGN_OR_RETURN(qkv, reshape(qkv, {b, l, 3, heads_, d}));
    MIXRT_ASSIGN_OR_RETURN(qkv, permute(qkv, {2, 0, 3, 1, 4}));
    MIXRT_ASSIGN_OR_RETURN(std::vector<Tensor> parts, split(qkv, 1, 0));
    for (const Tensor& p : parts) {
      MIXRT_ASSIGN_OR_RETURN(Tensor h, reshape(p, {b, heads_, l, d}));
      heads.push_back(std::move(h));
    }
    return heads;
  }
  // The stacked projection's thirds: [E, E] each (differentiable views).
  const Tensor* inputs[] = {&query, &key, &value};
  for (int part = 0; part < 3; ++part) {
    MIXRT_ASSIGN_OR_RETURN(Tensor w, narrow(in_proj_weight_, 0, part * e, e));
    MIXRT_ASSIGN_OR_RETURN(Tensor bias, narrow(in_proj_bias_, 0, part * e, e));
    MIXRT_ASSIGN_OR_RETURN(Tensor x, linear(*inputs[part], w, bias));
    const int64_t len = inputs[part]->shape()[1];
    MIXRT_ASSIGN_OR_RETURN(x, reshape(x, {b, len, heads_, d}));
    MIXRT_ASSIGN_OR_RETURN(x, permute(x, {0, 2, 1, 3}));  // [B, H, len, D]
    heads.push_back(std::move(x));
  }
  return heads;
}

namespace {

// A torch MultiheadAttention mask as an additive float one in `dtype`:
// a bool mask's true (not allowed) becomes -inf, a float mask is added as
// it is (a constant here).
absl::StatusOr<Tensor> AdditiveMask(const Tensor& mask, DType dtype) {
  if (mask.dtype() != DType::kBool) return mask.detach().to(dtype);
  MIXRT_ASSIGN_OR_RETURN(Tensor blocked,
                         full({}, -INFINITY, dtype, mask.device()));
  MIXRT_ASSIGN_OR_RETURN(Tensor open, zeros({}, dtype, mask.device()));
  return kernels::where(mask, blocked, open);
}

// The sum of the masks given (and the causal one, when asked), as
// [B, H, L, S] (dense: the attention kernels take one mask per batch and
// head), or undefined for none.
absl::StatusOr<Tensor> CombinedMask(const MultiheadAttentionForwardOptions& o,
                                    bool causal, int64_t b, int64_t h,
                                    int64_t l, int64_t s, DType dtype,
                                    const Device& device) {
  const Shape full_shape = {b, h, l, s};
  Tensor total;
  auto add_mask = [&](const Tensor& mask, const Shape& as) -> absl::Status {
    MIXRT_ASSIGN_OR_RETURN(Tensor additive, AdditiveMask(mask, dtype));
    MIXRT_ASSIGN_OR_RETURN(additive, additive.reshape(as));
    MIXRT_ASSIGN_OR_RETURN(additive, additive.expand(full_shape));
    if (!total.defined()) {
      MIXRT_ASSIGN_OR_RETURN(total, additive.contiguous());
    } else {
      MIXRT_ASSIGN_OR_RETURN(total, kernels::add(total, additive));
    }
    return absl::OkStatus();
  };
  if (o.attn_mask.defined()) {
    const Shape shape = o.attn_mask.shape();
    if (shape == Shape{l, s}) {
      MIXRT_RETURN_IF_ERROR(add_mask(o.attn_mask, {1, 1, l, s}));
    } else if (shape == Shape{b * h, l, s}) {
      MIXRT_RETURN_IF_ERROR(add_mask(o.attn_mask, full_shape));
    } else {
      return absl::InvalidArgumentError(absl::StrCat(
          "MultiheadAttention: attn_mask is ", ShapeToString(shape),
          "; expected [", l, ", ", s, "] or [", b * h, ", ", l, ", ", s, "]"));
    }
  }
  if (o.key_padding_mask.defined()) {
    if (o.key_padding_mask.shape() != Shape{b, s}) {
      return absl::InvalidArgumentError(
          absl::StrCat("MultiheadAttention: key_padding_mask is ",
                       ShapeToString(o.key_padding_mask.shape()),
                       "; expected [", b, ", ", s, "]"));
    }
    MIXRT_RETURN_IF_ERROR(add_mask(o.key_padding_mask, {b, 1, 1, s}));
  }
  if (causal) {
    // Query i sees keys j <= i (top-left aligned): the rest not allowed.
    MIXRT_ASSIGN_OR_RETURN(Tensor all, ones({l, s}, DType::kF32, device));
    MIXRT_ASSIGN_OR_RETURN(Tensor future, triu(all, 1));
    MIXRT_ASSIGN_OR_RETURN(Tensor none, zeros({}, DType::kF32, device));
    MIXRT_ASSIGN_OR_RETURN(Tensor blocked, kernels::ne(future, none));
    MIXRT_RETURN_IF_ERROR(add_mask(blocked, {1, 1, l, s}));
  }
  return total;
}

}  // namespace

absl::StatusOr<MultiheadAttentionOutput> MultiheadAttention::forward(
    const Tensor& query, const Tensor& key, const Tensor& value,
    const MultiheadAttentionForwardOptions& options) {
  const int64_t e = in_proj_weight_.shape()[1];
  for (const Tensor* t : {&query, &key, &value}) {
    if (!t->defined() || t->ndim() != 3 || t->shape()[2] != e) {
      return absl::InvalidArgumentError(absl::StrCat(
          "MultiheadAttention: query, key and value must be [batch, "
          "sequence, ",
          e, "]"));
    }
  }
  const int64_t b = query.shape()[0], l = query.shape()[1], s = key.shape()[1],
                d = e / heads_;
  if (key.shape()[0] != b || value.shape()[0] != b || value.shape()[1] != s) {
    return absl::InvalidArgumentError(absl::StrCat(
        "MultiheadAttention: query ", ShapeToString(query.shape()), ", key ",
        ShapeToString(key.shape()), ", value ", ShapeToString(value.shape()),
        "; expected one batch, and key and value of one length"));
  }
  MIXRT_ASSIGN_OR_RETURN(const std::vector<Tensor> heads,
                         ProjectHeads(query, key, value));
  const double p = is_training() ? dropout_ : 0;
  const bool masks_given =
      options.attn_mask.defined() || options.key_padding_mask.defined();
  MultiheadAttentionOutput out;
  Tensor y;
  if (!options.need_weights) {
    // A causal mask alone stays the kernel's is_causal.
    MIXRT_ASSIGN_OR_RETURN(
        Tensor mask, CombinedMask(options, causal_ && masks_given, b, heads_, l,
                                  s, heads[0].dtype(), query.device()));
    AttentionOptions a;
    a.attn_mask = mask;
    a.is_causal = causal_ && !masks_given;
    a.dropout_p = p;
    a.generator = generator_.get();
    MIXRT_ASSIGN_OR_RETURN(
        y, scaled_dot_product_attention(heads[0], heads[1], heads[2], a));
  } else {
    // As torch's need_weights path: softmax(q k^T / sqrt(D) + mask),
    // dropout, then the weighted values (a fully masked row is NaN there,
    // as in PyTorch).
    MIXRT_ASSIGN_OR_RETURN(Tensor kt, transpose(heads[1], 2, 3));
    MIXRT_ASSIGN_OR_RETURN(Tensor scores, matmul(heads[0], kt));
    MIXRT_ASSIGN_OR_RETURN(
        scores, scale(scores, 1.0 / std::sqrt(static_cast<double>(d))));
    MIXRT_ASSIGN_OR_RETURN(Tensor mask,
                           CombinedMask(options, causal_, b, heads_, l, s,
                                        scores.dtype(), query.device()));
    if (mask.defined()) {
      MIXRT_ASSIGN_OR_RETURN(scores, add(scores, mask));
    }
    MIXRT_ASSIGN_OR_RETURN(Tensor weights, softmax(scores, -1));
    if (p > 0) {
      MIXRT_ASSIGN_OR_RETURN(weights, dropout(weights, p, generator_.get()));
    }
    MIXRT_ASSIGN_OR_RETURN(Tensor wv, weights.to(heads[2].dtype()));
    MIXRT_ASSIGN_OR_RETURN(y, matmul(wv, heads[2]));
    out.weights = weights;
    if (options.average_attn_weights) {
      MIXRT_ASSIGN_OR_RETURN(out.weights, mean(weights, {1}));
    }
  }
  MIXRT_ASSIGN_OR_RETURN(y, permute(y, {0, 2, 1, 3}));  // [B, L, H, D]
  MIXRT_ASSIGN_OR_RETURN(y, reshape(y, {b, l, e}));
  MIXRT_ASSIGN_OR_RETURN(out.output, out_proj_->forward(y));
  return out;
}

absl::StatusOr<std::shared_ptr<TransformerBlock>> TransformerBlock::Create(
    const TransformerBlockOptions& o, const Device& device,
    Generator* generator) {
  if (o.mlp_ratio < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "TransformerBlock: mlp_ratio is ", o.mlp_ratio, "; expected >= 1"));
  }
  std::shared_ptr<TransformerBlock> m(new TransformerBlock());
  m->dropout_ = o.dropout;
  m->generator_ = generator ? generator->Share() : nullptr;
  MIXRT_ASSIGN_OR_RETURN(m->ln_1_, LayerNorm::Create(o.width, device));
  MIXRT_ASSIGN_OR_RETURN(
      m->attn_, MultiheadAttention::Create(o.width, o.heads, device, generator,
                                           o.dropout, o.causal));
  MIXRT_ASSIGN_OR_RETURN(m->ln_2_, LayerNorm::Create(o.width, device));
  MIXRT_ASSIGN_OR_RETURN(m->fc_, Linear::Create(o.width, o.mlp_ratio * o.width,
                                                device, generator));
  MIXRT_ASSIGN_OR_RETURN(m->proj_, Linear::Create(o.mlp_ratio * o.width,
                                                  o.width, device, generator));
  m->register_module("ln_1", m->ln_1_);
  m->register_module("attn", m->attn_);
  m->register_module("ln_2", m->ln_2_);
  m->register_module("fc", m->fc_);
  m->register_module("proj", m->proj_);
  return m;
}

absl::StatusOr<Tensor> TransformerBlock::forward(const Tensor& x) {
  MIXRT_ASSIGN_OR_RETURN(Tensor h, ln_1_->forward(x));
  MIXRT_ASSIGN_OR_RETURN(h, attn_->forward(h));
  MIXRT_ASSIGN_OR_RETURN(
      h, MaybeDropout(h, dropout_, is_training(), generator_.get()));
  MIXRT_ASSIGN_OR_RETURN(Tensor y, add(x, h));
  MIXRT_ASSIGN_OR_RETURN(h, ln_2_->forward(y));
  MIXRT_ASSIGN_OR_RETURN(h, fc_->forward(h));
  MIXRT_ASSIGN_OR_RETURN(h, gelu(h));
  MIXRT_ASSIGN_OR_RETURN(h, proj_->forward(h));
  MIXRT_ASSIGN_OR_RETURN(
      h, MaybeDropout(h, dropout_, is_training(), generator_.get()));
  return add(y, h);
}

absl::StatusOr<std::shared_ptr<GPT>> GPT::Create(const GPTOptions& o,
                                                 const Device& device,
                                                 Generator* generator) {
  if (o.vocab_size < 1 || o.context < 1 || o.layers < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "GPT: vocab_size ", o.vocab_size, ", context ", o.context,
        " and layers ", o.layers, " must be positive (layers may be 0)"));
  }
  std::shared_ptr<GPT> m(new GPT());
  m->options_ = o;
  m->generator_ = generator ? generator->Share() : nullptr;
  MIXRT_ASSIGN_OR_RETURN(
      m->wte_, Embedding::Create(o.vocab_size, o.width, device, generator));
  MIXRT_ASSIGN_OR_RETURN(
      m->wpe_, Embedding::Create(o.context, o.width, device, generator));
  // GPT-2's N(0, 0.02) embeddings: N(0, 1) as torch.nn.Embedding, scaled.
  for (const auto& e : {m->wte_, m->wpe_}) {
    const Tensor& w = e->weight();
    MIXRT_ASSIGN_OR_RETURN(Tensor scaled, kernels::scale(w, 0.02));
    MIXRT_RETURN_IF_ERROR(kernels::copy_(w, scaled));
  }
  m->register_module("wte", m->wte_);
  m->register_module("wpe", m->wpe_);
  for (int64_t i = 0; i < o.layers; ++i) {
    MIXRT_ASSIGN_OR_RETURN(auto block,
                           TransformerBlock::Create({.width = o.width,
                                                     .heads = o.heads,
                                                     .dropout = o.dropout,
                                                     .causal = true},
                                                    device, generator));
    m->register_module(absl::StrCat("h.", i), block);
    m->blocks_.push_back(std::move(block));
  }
  MIXRT_ASSIGN_OR_RETURN(m->ln_f_, LayerNorm::Create(o.width, device));
  m->register_module("ln_f", m->ln_f_);
  return m;
}

absl::StatusOr<Tensor> GPT::forward(const Tensor& tokens) {
  if (tokens.ndim() != 2 || tokens.dtype() != DType::kI64 ||
      tokens.shape()[1] > options_.context || tokens.shape()[1] < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "GPT: tokens are ", DTypeName(tokens.dtype()), " ",
        ShapeToString(tokens.shape()),
        "; expected i64 [batch, T] with 1 <= T <= ", options_.context));
  }
  const int64_t t = tokens.shape()[1];
  MIXRT_ASSIGN_OR_RETURN(Tensor positions,
                         arange(0, t, 1, DType::kI64, tokens.device()));
  MIXRT_ASSIGN_OR_RETURN(Tensor tok, wte_->forward(tokens));     // [B, T, E]
  MIXRT_ASSIGN_OR_RETURN(Tensor pos, wpe_->forward(positions));  // [T, E]
  MIXRT_ASSIGN_OR_RETURN(Tensor h, add(tok, pos));
  MIXRT_ASSIGN_OR_RETURN(
      h, MaybeDropout(h, options_.dropout, is_training(), generator_.get()));
  for (const auto& block : blocks_) {
    if (options_.checkpoint && is_training() && GradModeEnabled()) {
      MIXRT_ASSIGN_OR_RETURN(std::vector<Tensor> out,
                             checkpoint(
                                 [block](const std::vector<Tensor>& in)
                                     -> absl::StatusOr<std::vector<Tensor>> {
                                   MIXRT_ASSIGN_OR_RETURN(
                                       Tensor y, block->forward(in[0]));
                                   return std::vector<Tensor>{y};
                                 },
                                 {h}, {.generators = {generator_.get()}}));
      h = out[0];
    } else {
      MIXRT_ASSIGN_OR_RETURN(h, block->forward(h));
    }
  }
  MIXRT_ASSIGN_OR_RETURN(h, ln_f_->forward(h));
  // The output projection is the token embedding (weight tying).
  return linear(h, wte_->weight(), Tensor());
}

}  // namespace mixrt::nn
