// torch.autocast("cpu") lists (ATen autocast_mode.cpp, KernelCPU), one line
// per op mixrt implements. Upstream ops mixrt does not have stay as comments,
// in upstream's order, so the table diffs cleanly against it; a live entry
// for a missing op would be a promise nothing keeps.
#include "core/amp/autocast/autocast_policy.h"

namespace mixrt {
namespace {

constexpr AutocastCategory kLower = AutocastCategory::kLowerPrecision;
constexpr AutocastCategory kF32 = AutocastCategory::kFloat32;

constexpr AutocastPolicyEntry kCpuPolicy[] = {
    // lower_precision_fp
    {"conv2d", kLower, ""},
    // conv1d, conv3d, bmm, mm, linalg_vecdot, baddbmm, addmm, addbmm,
    {"linear", kLower, ""},
    // _convolution (deprecated), _convolution,
    {"matmul", kLower, ""},
    // conv_tbc, mkldnn_rnn_layer, conv_transpose1d, conv_transpose2d,
    // conv_transpose3d, prelu, _native_multi_head_attention
    {"scaled_dot_product_attention", kLower, ""},
    // fp32
    // avg_pool3d,
    {"binary_cross_entropy", kF32, ""},
    // grid_sampler, polar, prod, quantile, nanquantile, stft, cdist, trace,
    // view_as_complex, cholesky, cholesky_inverse, cholesky_solve, inverse,
    // lu_solve, orgqr, ormqr, pinverse, max_pool3d, max_unpool2d,
    // max_unpool3d, adaptive_avg_pool3d, reflection_pad1d, reflection_pad2d,
    // replication_pad1d, replication_pad2d, replication_pad3d,
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
    // promote (the rule is AutocastPromoteType); stack runs through cat
    {"cat", AutocastCategory::kPromote, ""},
    {"stack", AutocastCategory::kPromote, ""},
    // index_copy
};

}  // namespace

absl::Span<const AutocastPolicyEntry> CpuAutocastPolicy() { return kCpuPolicy; }

}  // namespace mixrt
