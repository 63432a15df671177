// torch.autocast("cpu") lists (ATen autocast_mode.cpp, KernelCPU), one line
// per op. Ops mixrt does not have yet stay as comments so the table diffs
// cleanly against upstream.
#include "core/amp/autocast_policy.h"

namespace mixrt {
namespace {

constexpr AutocastCategory kLower = AutocastCategory::kLowerPrecision;
constexpr AutocastCategory kF32 = AutocastCategory::kFloat32;
constexpr AutocastCategory kPromote = AutocastCategory::kPromote;

constexpr AutocastPolicyEntry kCpuPolicy[] = {
    // lower_precision_fp
    {"conv2d", kLower, ""},
    // conv1d, conv3d, conv_tbc, conv_transpose1d/2d/3d
    {"bmm", kLower, ""},
    {"mm", kLower, ""},
    {"linalg_vecdot", kLower, ""},
    {"baddbmm", kLower, ""},
    {"addmm", kLower, ""},
    {"addbmm", kLower, ""},
    {"linear", kLower, ""},
    {"matmul", kLower, ""},
    // _convolution, prelu, scaled_dot_product_attention,
    // _native_multi_head_attention
    // fp32
    // avg_pool3d, binary_cross_entropy, grid_sampler, polar, prod, quantile,
    // nanquantile, stft, cdist, trace, view_as_complex, cholesky, ...
    {"mse_loss", kF32, ""},
    {"l1_loss", kF32, ""},
    {"smooth_l1_loss", kF32, ""},
    {"nll_loss", kF32, ""},
    {"cross_entropy", kF32, ""},
    {"binary_cross_entropy_with_logits", kF32, ""},
    // huber_loss, margin_ranking_loss, soft_margin_loss, triplet_margin_loss,
    // multi_margin_loss, kl_div, poisson_nll_loss, cosine_embedding_loss,
    // nll_loss2d, hinge_embedding_loss, multilabel_margin_loss, ctc_loss,
    // fft_*, linalg_*, ...
    // promote
    {"cat", kPromote, ""},
    {"stack", kPromote, ""},
    // index_copy
};

}  // namespace

absl::Span<const AutocastPolicyEntry> CpuAutocastPolicy() { return kCpuPolicy; }

}  // namespace mixrt
