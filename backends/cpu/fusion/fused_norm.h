// layer_norm with its neighbours (ABI 1.1) on the CPU plugin:
// - a layer_norm whose normalized result only a cast reads (autocast's
//   bf16 copy before a linear) writes the cast's dtype directly, so the f32
//   result never reaches memory. Each row is normalized in f32 as the op
//   does and rounded once to the cast's dtype, as the cast would.
// - a layer_norm_backward reads its gradient before autocast's widening
//   copy (bf16 -> f32 is exact), and adds the residual branch's gradient
//   and rounds to the cast that follows it (the pre-norm block's dx + dres
//   -> bf16), so neither the f32 gradient nor the f32 sum reaches memory.
// Both are bit for bit op by op.
#ifndef MIXRT_BACKENDS_CPU_FUSION_FUSED_NORM_H_
#define MIXRT_BACKENDS_CPU_FUSION_FUSED_NORM_H_

#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "plugins/sdk/fusion.h"
#include "plugins/sdk/tensor_ref.h"

namespace mixrt::cpu {

// y = (x - mean) * rstd * weight + bias over the rows of x [R, N], y of
// any float dtype (cpu_softmax_norm.cc); mean and rstd may be null.
void LayerNormRows(const sdk::TensorRef& x, const sdk::TensorRef* weight,
                   const sdk::TensorRef* bias, float eps, void* y,
                   MixrtDtype y_dtype, float* mean_out, float* rstd_out);

// layer_norm_backward over the rows of x [R, N]: gx = its gradient (+
// residual [R, N] f32, when not null) rounded once to gx_dtype, not
// computed when gx is null; gy of any float dtype. grad_weight and
// grad_bias (param_dtype, [N]) are written when not null; weight null is
// all ones.
void LayerNormBackwardRows(const sdk::TensorRef& gy, const sdk::TensorRef& x,
                           const float* mean, const float* rstd,
                           const sdk::TensorRef* weight, void* gx,
                           MixrtDtype gx_dtype, const float* residual,
                           void* grad_weight, void* grad_bias,
                           MixrtDtype param_dtype);

// Per node, its group (`first`, first + 1, ...) or -1; nodes `taken` by
// another fusion are left out.
std::vector<int> ClaimNormCasts(const sdk::FusionGraph& graph,
                                absl::Span<const int> taken, int first);

absl::StatusOr<std::unique_ptr<sdk::FusedKernel>> CompileNormCast(
    const sdk::FusionGraph& graph, absl::Span<const int> group_of_node,
    int group);

// As ClaimNormCasts, for layer_norm_backwards with their widening copy,
// their residual add and its cast (at least one of them).
std::vector<int> ClaimNormBackwards(const sdk::FusionGraph& graph,
                                    absl::Span<const int> taken, int first);

absl::StatusOr<std::unique_ptr<sdk::FusedKernel>> CompileNormBackward(
    const sdk::FusionGraph& graph, absl::Span<const int> group_of_node,
    int group);

}  // namespace mixrt::cpu

#endif  // MIXRT_BACKENDS_CPU_FUSION_FUSED_NORM_H_
