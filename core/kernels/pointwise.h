// Pointwise ops with PyTorch broadcasting and type promotion, on the
// tensors' device (no autograd, no autocast: mixrt::add is the
// differentiable one).
//
//   // Broadcast, promote:
//   absl::StatusOr<Tensor> y = mixrt::kernels::add(a, b);
//   y = mixrt::kernels::gelu(x, /*tanh_approximation=*/false);
#ifndef MIXRT_CORE_KERNELS_POINTWISE_H_
#define MIXRT_CORE_KERNELS_POINTWISE_H_

#include "absl/status/statusor.h"
#include "core/tensor/tensor.h"
#include "mixrt/plugin_api.h"

namespace mixrt::kernels {

// Binary arithmetic; integers are allowed (division truncates).
absl::StatusOr<Tensor> add(const Tensor& a, const Tensor& b);
absl::StatusOr<Tensor> sub(const Tensor& a, const Tensor& b);
absl::StatusOr<Tensor> mul(const Tensor& a, const Tensor& b);
absl::StatusOr<Tensor> div(const Tensor& a, const Tensor& b);
absl::StatusOr<Tensor> pow(const Tensor& a, const Tensor& b);
absl::StatusOr<Tensor> maximum(const Tensor& a, const Tensor& b);
absl::StatusOr<Tensor> minimum(const Tensor& a, const Tensor& b);
absl::StatusOr<Tensor> binary(MixrtBinaryKind kind, const Tensor& a,
                              const Tensor& b);

// Unary ops; neg and abs also take integers, the rest floating tensors.
absl::StatusOr<Tensor> neg(const Tensor& x);
absl::StatusOr<Tensor> abs(const Tensor& x);
absl::StatusOr<Tensor> relu(const Tensor& x);
absl::StatusOr<Tensor> leaky_relu(const Tensor& x, double negative_slope);
absl::StatusOr<Tensor> gelu(const Tensor& x, bool tanh_approximation = false);
absl::StatusOr<Tensor> silu(const Tensor& x);
absl::StatusOr<Tensor> sigmoid(const Tensor& x);
absl::StatusOr<Tensor> tanh(const Tensor& x);
absl::StatusOr<Tensor> exp(const Tensor& x);
absl::StatusOr<Tensor> log(const Tensor& x);
absl::StatusOr<Tensor> log1p(const Tensor& x);
absl::StatusOr<Tensor> sqrt(const Tensor& x);
absl::StatusOr<Tensor> rsqrt(const Tensor& x);
// NaN bounds mean "no bound".
absl::StatusOr<Tensor> clamp(const Tensor& x, double min, double max);
absl::StatusOr<Tensor> pow(const Tensor& x, double exponent);
// alpha * x + beta, in x's dtype.
absl::StatusOr<Tensor> scale(const Tensor& x, double alpha, double beta = 0);
absl::StatusOr<Tensor> unary(MixrtUnaryKind kind, const Tensor& x,
                             double alpha = 0, double beta = 0);
// grad_out * f'(x) for unary(kind, x, alpha, beta).
absl::StatusOr<Tensor> unary_backward(MixrtUnaryKind kind,
                                      const Tensor& grad_out, const Tensor& x,
                                      double alpha = 0, double beta = 0);

// Comparisons give bool tensors.
absl::StatusOr<Tensor> compare(MixrtCompareKind kind, const Tensor& a,
                               const Tensor& b);
absl::StatusOr<Tensor> eq(const Tensor& a, const Tensor& b);
absl::StatusOr<Tensor> ne(const Tensor& a, const Tensor& b);
absl::StatusOr<Tensor> lt(const Tensor& a, const Tensor& b);
absl::StatusOr<Tensor> le(const Tensor& a, const Tensor& b);
absl::StatusOr<Tensor> gt(const Tensor& a, const Tensor& b);
absl::StatusOr<Tensor> ge(const Tensor& a, const Tensor& b);
// condition ? x : y, broadcasting all three.
absl::StatusOr<Tensor> where(const Tensor& condition, const Tensor& x,
                             const Tensor& y);

}  // namespace mixrt::kernels

#endif  // MIXRT_CORE_KERNELS_POINTWISE_H_
