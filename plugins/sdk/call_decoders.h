// Decoders for the ops whose tensors the ABI lays out by convention: the
// fused optimizer steps (optional grad_scale and found_inf after the
// gradient, as the flags say) and cross_entropy (forward and backward).
// Each checks counts, dtypes and shapes, so every backend refuses a
// malformed call with the same words; the math stays each backend's own.
//
//   MIXRT_ASSIGN_OR_RETURN(sdk::OptimizerStepCall step,
//                          sdk::DecodeOptimizerStep(call, attrs->flags, 2));
//   if (step.found_inf != nullptr) ...
#ifndef MIXRT_PLUGINS_SDK_CALL_DECODERS_H_
#define MIXRT_PLUGINS_SDK_CALL_DECODERS_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

#include "plugins/sdk/plugin.h"
#include "plugins/sdk/status.h"

namespace mixrt::sdk {

// An SGD or AdamW step: inputs (grad [, grad_scale] [, found_inf]),
// outputs (param, state...), all in place.
struct OptimizerStepCall {
  const TensorRef* grad = nullptr;
  const TensorRef* grad_scale = nullptr;  // f32 [1], when flagged.
  const TensorRef* found_inf = nullptr;   // f32 [1], when flagged.
};

// `state_outputs` counts the param too (SGD: 1 or 2, AdamW:
// AdamWOutputs(flags)). The outputs must be f32 and the gradient floating,
// with the param's shape; flag bits the op does not know are refused.
StatusOr<OptimizerStepCall> DecodeOptimizerStep(const KernelCall& call,
                                                uint32_t flags,
                                                size_t state_outputs);

// A multi_tensor_sgd_step (ABI 1.1) as the single-parameter sgd_step calls
// it stands for, each sharing the optional grad_scale and found_inf, in
// parameter order. Refuses counts that do not split into n >= 1 steps.
StatusOr<std::vector<KernelCall>> SplitMultiTensorSgd(const KernelCall& call);

// Runs `sgd_step` on each of SplitMultiTensorSgd's calls in turn: how a
// plugin implements multi_tensor_sgd_step with its single-parameter step.
Status RunEachSgdStep(const KernelCall& call,
                      std::function<Status(const KernelCall&)> sgd_step);

// cross_entropy: inputs (logits [N, C], target i64 [N]); backward:
// (grad_loss [N], logits, target). One output.
struct CrossEntropyCall {
  const MixrtCrossEntropyAttrs* attrs = nullptr;
  const TensorRef* grad_loss = nullptr;  // Backward only.
  const TensorRef* logits = nullptr;
  const TensorRef* target = nullptr;
  const TensorRef* out = nullptr;
  bool backward = false;
  int64_t rows() const { return logits->dim(0); }
  int64_t classes() const { return logits->dim(1); }
};

StatusOr<CrossEntropyCall> DecodeCrossEntropy(const KernelCall& call);

// For plugins whose memory the host can read: every target is ignore_index
// or a class in [0, C). (Device plugins flag bad targets in the kernel.)
Status CheckCrossEntropyTargets(const CrossEntropyCall& call);

// scaled_dot_product_attention and its backward (ABI 1.1): q [G, L, E],
// k [G, S, E], v [G, S, Ev] contiguous in one floating dtype, the optional
// mask [G, L, S], and the outputs' shapes and dtypes.
struct AttentionCall {
  const MixrtAttentionAttrs* attrs = nullptr;
  bool backward = false;
  const TensorRef* grad_out = nullptr;  // Backward only.
  const TensorRef* q = nullptr;
  const TensorRef* k = nullptr;
  const TensorRef* v = nullptr;
  const TensorRef* out = nullptr;     // Forward: output; backward: input.
  const TensorRef* lse = nullptr;     // Forward: output; backward: input.
  const TensorRef* mask = nullptr;    // When attrs->mask_kind != NONE.
  const TensorRef* grad_q = nullptr;  // Backward outputs.
  const TensorRef* grad_k = nullptr;
  const TensorRef* grad_v = nullptr;
  int64_t groups = 0, queries = 0, keys = 0, head_dim = 0, value_dim = 0;
};

StatusOr<AttentionCall> DecodeAttention(const KernelCall& call);

// multi_tensor_norm (ABI 1.1): any number of contiguous floating inputs,
// one f32 [1] output.
Status ExpectMultiTensorNorm(const KernelCall& call);

// dropout (ABI 1.1): one floating input, one output of its shape and dtype,
// p in [0, 1).
struct DropoutCall {
  MixrtDropoutAttrs attrs;
  const TensorRef* x = nullptr;
  const TensorRef* out = nullptr;
};

StatusOr<DropoutCall> DecodeDropout(const KernelCall& call);

}  // namespace mixrt::sdk

#endif  // MIXRT_PLUGINS_SDK_CALL_DECODERS_H_
