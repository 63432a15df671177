// Reductions over any set of dims (empty = all), with keepdim. Floating
// tensors only; accumulation is at least f32 whatever the dtype.
#ifndef MIXRT_CORE_KERNELS_REDUCE_H_
#define MIXRT_CORE_KERNELS_REDUCE_H_

#include <optional>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "core/tensor/tensor.h"
#include "mixrt/plugin_api.h"

namespace mixrt::kernels {

// dtype: the result's (torch.sum's dtype=): x's own or f32. f32 sums a
// bf16/f16 tensor without widening it first (a bias gradient under
// autocast): the same value as sum(x.to(f32)), one pass over x instead of
// three.
absl::StatusOr<Tensor> sum(const Tensor& x, absl::Span<const int64_t> dims = {},
                           bool keepdim = false,
                           std::optional<DType> dtype = std::nullopt);
absl::StatusOr<Tensor> mean(const Tensor& x,
                            absl::Span<const int64_t> dims = {},
                            bool keepdim = false);
absl::StatusOr<Tensor> amax(const Tensor& x,
                            absl::Span<const int64_t> dims = {},
                            bool keepdim = false);
absl::StatusOr<Tensor> amin(const Tensor& x,
                            absl::Span<const int64_t> dims = {},
                            bool keepdim = false);
// max |x|: the infinity norm.
absl::StatusOr<Tensor> abs_max(const Tensor& x,
                               absl::Span<const int64_t> dims = {},
                               bool keepdim = false);
// correction 1 gives the unbiased estimate (PyTorch's default).
absl::StatusOr<Tensor> var(const Tensor& x, absl::Span<const int64_t> dims = {},
                           double correction = 1, bool keepdim = false);
absl::StatusOr<Tensor> std(const Tensor& x, absl::Span<const int64_t> dims = {},
                           double correction = 1, bool keepdim = false);
// sqrt(sum of x^2 over every element of every tensor), f32 [1] on their
// device: torch.nn.utils.clip_grad_norm_'s total norm, in one multi-tensor
// launch (MIXRT_OP_MULTI_TENSOR_NORM). A plugin older than ABI 1.1, or one
// without the op, gets the same value tensor by tensor, still on the device.
absl::StatusOr<Tensor> multi_tensor_norm(absl::Span<const Tensor> tensors,
                                         const Device& device);
absl::StatusOr<Tensor> reduce(MixrtReduceKind kind, const Tensor& x,
                              absl::Span<const int64_t> dims, bool keepdim,
                              double correction = 0,
                              std::optional<DType> dtype = std::nullopt);

}  // namespace mixrt::kernels

#endif  // MIXRT_CORE_KERNELS_REDUCE_H_
