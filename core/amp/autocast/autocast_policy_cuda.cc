// torch.autocast("cuda") lists (ATen autocast_mode.cpp, KernelCUDA), one
// line per op mixrt implements. Upstream ops mixrt does not have stay as
// comments so the table diffs cleanly against upstream.
#include "core/amp/autocast/autocast_policy.h"

namespace mixrt {
namespace {

constexpr AutocastCategory kLower = AutocastCategory::kLowerPrecision;
constexpr AutocastCategory kF32 = AutocastCategory::kFloat32;

constexpr AutocastPolicyEntry kCudaPolicy[] = {
    // lower_precision_fp
    {"conv2d", kLower, ""},
    // _convolution, conv1d, conv3d, conv_tbc, conv_transpose1d/2d/3d,
    {"matmul", kLower, ""},
    // mm, bmm, addmm, baddbmm,
    {"linear", kLower, ""},
    // addmv, addr, addbmm, chain_matmul, linalg_multi_dot,
    // _thnn_fused_lstm_cell,
    // _thnn_fused_gru_cell, lstm_cell, gru_cell, rnn_tanh_cell, rnn_relu_cell,
    // _scaled_dot_product_flash_attention, prelu
    {"scaled_dot_product_attention", kLower, ""},
    // fp32
    // acos, asin, cosh, erfinv, expm1, reciprocal, rsqrt, sinh, tan, softplus,
    // layer_norm, native_layer_norm, group_norm, frobenius_norm, nuclear_norm,
    // cosine_similarity, poisson_nll_loss, cosine_embedding_loss, nll_loss,
    // nll_loss2d, hinge_embedding_loss, kl_div, l1_loss, smooth_l1_loss,
    // huber_loss, mse_loss, margin_ranking_loss, multilabel_margin_loss,
    // soft_margin_loss, triplet_margin_loss, multi_margin_loss,
    // binary_cross_entropy_with_logits, dist, pdist, cdist, renorm,
    // logsumexp, cumprod, cumsum, prod, sum, softmax, log_softmax, norm
    // (mean is not on upstream's list: an f16 input gives an f16 mean.)
    // log1p, rsqrt are on it but not implemented.
    {"exp", kF32, ""},
    {"log", kF32, ""},
    {"pow", kF32, ""},
    {"layer_norm", kF32, ""},
    {"sum", kF32, ""},
    {"softmax", kF32, ""},
    {"log_softmax", kF32, ""},
    {"mse_loss", kF32, ""},
    {"l1_loss", kF32, ""},
    {"smooth_l1_loss", kF32, ""},
    {"nll_loss", kF32, ""},
    {"cross_entropy", kF32, ""},
    {"binary_cross_entropy_with_logits", kF32, ""},
    // banned
    {"binary_cross_entropy", AutocastCategory::kRefused,
     "torch.nn.functional.binary_cross_entropy and torch.nn.BCELoss are unsafe "
     "to autocast. Many models use a sigmoid layer right before the binary "
     "cross entropy layer. In this case, combine the two layers using "
     "binary_cross_entropy_with_logits or BCEWithLogitsLoss, which are safe to "
     "autocast."},
    // promote (the rule is AutocastPromoteType); stack runs through cat
    {"cat", AutocastCategory::kPromote, ""},
    {"stack", AutocastCategory::kPromote, ""},
    // addcdiv, addcmul, atan2, bilinear, cross, dot, grid_sampler, index_put,
    // scatter_add, tensordot
};

}  // namespace

absl::Span<const AutocastPolicyEntry> CudaAutocastPolicy() {
  return kCudaPolicy;
}

}  // namespace mixrt
