// Embedding lookup and its gradient (a scatter-add into the table).
#ifndef MIXRT_CORE_KERNELS_EMBEDDING_H_
#define MIXRT_CORE_KERNELS_EMBEDDING_H_

#include "absl/status/statusor.h"
#include "core/tensor/tensor.h"

namespace mixrt::kernels {

// weight [V, D], indices i64/i32 [...] -> [..., D]. Out-of-range indices are
// an error naming the index and V.
absl::StatusOr<Tensor> embedding(const Tensor& weight, const Tensor& indices);
// grad_out [..., D] -> grad_weight [num_weights, D]; rows at padding_idx
// (-1: none) get no gradient.
absl::StatusOr<Tensor> embedding_backward(const Tensor& grad_out,
                                          const Tensor& indices,
                                          int64_t num_weights,
                                          int64_t padding_idx = -1);

}  // namespace mixrt::kernels

#endif  // MIXRT_CORE_KERNELS_EMBEDDING_H_
