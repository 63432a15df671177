// Pointwise arithmetic with PyTorch broadcasting and type promotion.
#ifndef MIXRT_CORE_TENSOR_ELEMENTWISE_H_
#define MIXRT_CORE_TENSOR_ELEMENTWISE_H_

#include "absl/status/statusor.h"
#include "core/tensor/tensor.h"

namespace mixrt {

absl::StatusOr<Tensor> add(const Tensor& a, const Tensor& b);
absl::StatusOr<Tensor> sub(const Tensor& a, const Tensor& b);
absl::StatusOr<Tensor> mul(const Tensor& a, const Tensor& b);
absl::StatusOr<Tensor> div(const Tensor& a, const Tensor& b);
absl::StatusOr<Tensor> neg(const Tensor& a);

}  // namespace mixrt

#endif  // MIXRT_CORE_TENSOR_ELEMENTWISE_H_
