// The transformer modules a small GPT is built from, with PyTorch's
// parameter names and initializations:
//   MultiheadAttention  torch.nn.MultiheadAttention(batch_first=True),
//                       self-attention, optionally causal;
//   TransformerBlock    pre-LayerNorm: x + attn(ln_1(x)), then
//                       x + mlp(ln_2(x)), mlp = Linear, GELU, Linear;
//   GPT                 token + position embeddings, N blocks, final
//                       LayerNorm, output projection tied to the token
//                       embedding.
//
//   auto gpt = *mixrt::nn::GPT::Create({.vocab_size = 96, .context = 256,
//                                       .width = 384, .heads = 6,
//                                       .layers = 6}, device, &gen);
//   Tensor logits = *gpt->forward(tokens);  // [B, T] i64 -> [B, T, vocab]
#ifndef MIXRT_CORE_NN_TRANSFORMER_H_
#define MIXRT_CORE_NN_TRANSFORMER_H_

#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "core/nn/module.h"

namespace mixrt::nn {

// torch.nn.MultiheadAttention.forward's arguments beyond the inputs (batch
// first). Masks as PyTorch's: a bool mask is true where attention is NOT
// allowed; a floating one is added to the scores.
struct MultiheadAttentionForwardOptions {
  Tensor key_padding_mask;  // [B, S]: keys to ignore per batch element.
  Tensor attn_mask;         // [L, S] or [B * num_heads, L, S].
  // Also return the attention weights (after dropout), averaged over the
  // heads ([B, L, S]) or not ([B, num_heads, L, S]). Without them the
  // attention runs as one fused kernel where the backend has one.
  bool need_weights = true;
  bool average_attn_weights = true;
};

struct MultiheadAttentionOutput {
  Tensor output;   // [B, L, embed_dim].
  Tensor weights;  // Undefined unless need_weights.
};

class MultiheadAttention : public Module {
 public:
  // embed_dim must divide by num_heads.
  static absl::StatusOr<std::shared_ptr<MultiheadAttention>> Create(
      int64_t embed_dim, int64_t num_heads, const Device& device,
      Generator* generator = nullptr, double dropout = 0,
      bool is_causal = false);
  // Self-attention over x [B, T, embed_dim] (no weights returned).
  absl::StatusOr<Tensor> forward(const Tensor& x) override;
  // torch's forward(query, key, value, ...): query [B, L, E], key and
  // value [B, S, E] (cross-attention when they differ from the query). A
  // module created causal adds the causal mask to the ones given.
  absl::StatusOr<MultiheadAttentionOutput> forward(
      const Tensor& query, const Tensor& key, const Tensor& value,
      const MultiheadAttentionForwardOptions& options = {});

 private:
  MultiheadAttention() = default;
  // q, k and v as [B, H, len, D]: one stacked GEMM when query, key and
  // value are one tensor (self-attention), else one third of it each.
  absl::StatusOr<std::vector<Tensor>> ProjectHeads(const Tensor& query,
                                                   const Tensor& key,
                                                   const Tensor& value) const;
  int64_t heads_ = 1;
  double dropout_ = 0;
  bool causal_ = false;
  // The dropout's draws: the creator's generator, shared (it may be
  // destroyed first), or null for the default generator.
  std::shared_ptr<Generator> generator_;
  Tensor in_proj_weight_;  // [3 E, E]: q, k and v projections stacked.
  Tensor in_proj_bias_;
  std::shared_ptr<Linear> out_proj_;
};

struct TransformerBlockOptions {
  int64_t width = 384;
  int64_t heads = 6;
  int64_t mlp_ratio = 4;  // Hidden width of the MLP / width.
  double dropout = 0;     // After attention and the MLP, and in attention.
  bool causal = true;
};

class TransformerBlock : public Module {
 public:
  static absl::StatusOr<std::shared_ptr<TransformerBlock>> Create(
      const TransformerBlockOptions& options, const Device& device,
      Generator* generator = nullptr);
  absl::StatusOr<Tensor> forward(const Tensor& x) override;

 private:
  TransformerBlock() = default;
  double dropout_ = 0;
  // The dropout's draws: the creator's generator, shared (it may be
  // destroyed first), or null for the default generator.
  std::shared_ptr<Generator> generator_;
  std::shared_ptr<LayerNorm> ln_1_, ln_2_;
  std::shared_ptr<MultiheadAttention> attn_;
  std::shared_ptr<Linear> fc_, proj_;
};

struct GPTOptions {
  int64_t vocab_size = 96;
  int64_t context = 256;  // Longest sequence (position embeddings).
  int64_t width = 384;
  int64_t heads = 6;
  int64_t layers = 6;
  double dropout = 0;
  // Gradient checkpointing per block while training: each block's
  // activations are recomputed in backward instead of kept.
  bool checkpoint = false;
};

class GPT : public Module {
 public:
  static absl::StatusOr<std::shared_ptr<GPT>> Create(
      const GPTOptions& options, const Device& device,
      Generator* generator = nullptr);
  // tokens [B, T] (i64, T <= context) -> logits [B, T, vocab_size].
  absl::StatusOr<Tensor> forward(const Tensor& tokens) override;
  const GPTOptions& options() const { return options_; }

 private:
  GPT() = default;
  GPTOptions options_;
  // The dropout's draws: the creator's generator, shared (it may be
  // destroyed first), or null for the default generator.
  std::shared_ptr<Generator> generator_;
  std::shared_ptr<Embedding> wte_, wpe_;
  std::vector<std::shared_ptr<TransformerBlock>> blocks_;
  std::shared_ptr<LayerNorm> ln_f_;
};

}  // namespace mixrt::nn

#endif  // MIXRT_CORE_NN_TRANSFORMER_H_
