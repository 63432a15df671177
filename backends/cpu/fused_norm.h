// layer_norm with its neighbour (ABI 1.1) on the CPU plugin: a layer_norm
// whose normalized result only a cast reads (autocast's bf16 copy before
// a linear) writes the cast's dtype directly, so the f32 result never
// reaches memory. Each row is normalized in f32 as the op does and rounded
// once to the cast's dtype, as the cast would: bit for bit op by op.
#ifndef MIXRT_BACKENDS_CPU_FUSED_NORM_H_
#define MIXRT_BACKENDS_CPU_FUSED_NORM_H_

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
                   const sdk::TensorRef* bias, float eps, void* y, MixrtDtype y_dtype,
                   float* mean_out, float* rstd_out);

// Per node, its group (`first`, first + 1, ...) or -1; nodes `taken` by
// another fusion are left out.
std::vector<int> ClaimNormCasts(const sdk::FusionGraph& graph, absl::Span<const int> taken,
                                int first);

absl::StatusOr<std::unique_ptr<sdk::FusedKernel>> CompileNormCast(
    const sdk::FusionGraph& graph, absl::Span<const int> group_of_node, int group);

}  // namespace mixrt::cpu

#endif  // MIXRT_BACKENDS_CPU_FUSED_NORM_H_
