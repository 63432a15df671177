// Attention reading its heads in place (ABI 1.1) on the CPU plugin. A
// multi-head attention splits its packed projection [B, T, 3, H, D] into
// dense q, k and v [B, H, T, D] with three copies before
// scaled_dot_product_attention; the fused kernel takes those copies and
// the attention as one group and reads each head's rows where the
// projection wrote them (attention_rows.h). The copy merging the result's
// heads back ([B, H, T, D] -> [B, T, H, D], for the output projection),
// when it is the result's only reader, is taken too: the kernel writes
// each row where that copy would. A copy whose result is needed elsewhere
// (saved for a backward) stays a copy. Numerically it is the attention op
// itself: the same kernel on the same values.
#ifndef MIXRT_BACKENDS_CPU_FUSION_FUSED_ATTENTION_H_
#define MIXRT_BACKENDS_CPU_FUSION_FUSED_ATTENTION_H_

#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "plugins/sdk/fusion.h"

namespace mixrt::cpu {

// Per node, its group (`first`, first + 1, ...) or -1: each attention
// forward with the copies that only it reads and the copy merging its
// heads; nodes `taken` by another fusion are left out, and an attention
// that would take no copy too.
std::vector<int> ClaimAttentionHeads(const sdk::FusionGraph& graph,
                                     absl::Span<const int> taken, int first);

absl::StatusOr<std::unique_ptr<sdk::FusedKernel>> CompileAttentionHeads(
    const sdk::FusionGraph& graph, absl::Span<const int> group_of_node,
    int group);

}  // namespace mixrt::cpu

#endif  // MIXRT_BACKENDS_CPU_FUSION_FUSED_ATTENTION_H_
