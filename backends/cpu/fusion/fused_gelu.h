// A GELU with its derivative (ABI 1.1) on the CPU plugin: unary GELU(x) and
// unary_backward GELU(g, x) on the same x are one pass computing one erfc
// per element for both (gelu_rows.h), bit for bit the two ops. The
// compiler asks for the pair when it saves a GELU's derivative for the
// backward instead of its input (training_passes.h): g is then a fill of
// ones, a WEIGHT value the kernel checks once per version and stops reading
// (keeps_copy), or copies when it is anything else.
#ifndef MIXRT_BACKENDS_CPU_FUSION_FUSED_GELU_H_
#define MIXRT_BACKENDS_CPU_FUSION_FUSED_GELU_H_

#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "plugins/sdk/fusion.h"

namespace mixrt::cpu {

// Per node, its group (`first`, first + 1, ...) or -1: each GELU with the
// first GELU gradient taken at the same x; nodes `taken` by another fusion
// are left out.
std::vector<int> ClaimGeluWithGrad(const sdk::FusionGraph& graph,
                                   absl::Span<const int> taken, int first);

// Whether `group` is such a pair (a loop group never is: the pair is
// claimed first).
bool IsGeluWithGrad(const sdk::FusionGraph& graph,
                    absl::Span<const int> group_of_node, int group);

absl::StatusOr<std::unique_ptr<sdk::FusedKernel>> CompileGeluWithGrad(
    const sdk::FusionGraph& graph, absl::Span<const int> group_of_node,
    int group);

}  // namespace mixrt::cpu

#endif  // MIXRT_BACKENDS_CPU_FUSION_FUSED_GELU_H_
