// cross_entropy's cases the fused kernel does not take, composed of
// differentiable ops (cross_entropy_composite.cc).
#ifndef MIXRT_CORE_FUNCTIONAL_CROSS_ENTROPY_COMPOSITE_H_
#define MIXRT_CORE_FUNCTIONAL_CROSS_ENTROPY_COMPOSITE_H_

#include "absl/status/statusor.h"
#include "core/kernels/op_options.h"
#include "core/tensor/tensor.h"

namespace mixrt::internal {

// [N, C, d...] logits, class weights, or floating (probability) targets.
bool NeedsCompositeCrossEntropy(const Tensor& logits, const Tensor& target,
                                const CrossEntropyOptions& options);
absl::StatusOr<Tensor> CompositeCrossEntropy(
    const Tensor& logits, const Tensor& target,
    const CrossEntropyOptions& options);

}  // namespace mixrt::internal

#endif  // MIXRT_CORE_FUNCTIONAL_CROSS_ENTROPY_COMPOSITE_H_
