// softmax and log_softmax along one dim, with their backward kernels.
#ifndef MIXRT_CORE_KERNELS_SOFTMAX_H_
#define MIXRT_CORE_KERNELS_SOFTMAX_H_

#include "absl/status/statusor.h"
#include "core/tensor/tensor.h"

namespace mixrt::kernels {

absl::StatusOr<Tensor> softmax(const Tensor& x, int64_t dim);
absl::StatusOr<Tensor> log_softmax(const Tensor& x, int64_t dim);
// Gradients from the forward output y and the gradient of y.
absl::StatusOr<Tensor> softmax_backward(const Tensor& grad_y, const Tensor& y,
                                        int64_t dim);
absl::StatusOr<Tensor> log_softmax_backward(const Tensor& grad_y,
                                            const Tensor& y, int64_t dim);

}  // namespace mixrt::kernels

#endif  // MIXRT_CORE_KERNELS_SOFTMAX_H_
