// Fused scaled dot-product attention on the device's plugin
// (MIXRT_OP_SCALED_DOT_PRODUCT_ATTENTION, ABI 1.1). Unimplemented when the
// plugin has no fused kernel: the caller then composes matmul, softmax and
// matmul (core/functional).
#ifndef MIXRT_CORE_KERNELS_ATTENTION_H_
#define MIXRT_CORE_KERNELS_ATTENTION_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "core/tensor/tensor.h"

namespace mixrt::kernels {

struct FusedAttentionArgs {
  Tensor mask;  // Optional: bool (attend where true) or additive float,
                // broadcastable to [..., L, S].
  double scale = 1;
  double dropout_p = 0;
  uint64_t seed = 0, offset = 0;  // Philox, for dropout.
  bool is_causal = false;
};

struct FusedAttentionOutput {
  Tensor out;  // [..., L, Ev] in q's dtype.
  Tensor lse;  // [G, L] f32: what the backward needs.
  // The mask as launched ([G, L, S]; a copy when its broadcast needed one),
  // so the backward does not build it again. Undefined without a mask.
  Tensor grouped_mask;
};

// q [..., L, E], k [..., S, E], v [..., S, Ev] of one floating dtype.
absl::StatusOr<FusedAttentionOutput> scaled_dot_product_attention(
    const Tensor& q, const Tensor& k, const Tensor& v,
    const FusedAttentionArgs& args);

// {grad_q, grad_k, grad_v} shaped like q, k, v.
absl::StatusOr<std::vector<Tensor>> scaled_dot_product_attention_backward(
    const Tensor& grad_out, const Tensor& q, const Tensor& k, const Tensor& v,
    const FusedAttentionOutput& forward, const FusedAttentionArgs& args);

}  // namespace mixrt::kernels

#endif  // MIXRT_CORE_KERNELS_ATTENTION_H_
