// Matrix products with NumPy/PyTorch semantics and fusable epilogues, on
// the tensors' device (no autograd, no autocast).
//
//   // [.., M, K] @ [.., K, N]:
//   Tensor y = *mixrt::kernels::matmul(a, b);
//   // relu(x @ weight^T + bias) in one launch:
//   Tensor h = *mixrt::kernels::linear(
//       x, weight, bias, {.activation = MIXRT_ACTIVATION_RELU});
#ifndef MIXRT_CORE_KERNELS_MATMUL_H_
#define MIXRT_CORE_KERNELS_MATMUL_H_

#include <optional>

#include "absl/status/statusor.h"
#include "core/kernels/op_options.h"
#include "core/tensor/tensor.h"
#include "mixrt/plugin_api.h"

namespace mixrt::kernels {

// 1-D operands are promoted as in numpy.matmul (and the added dim removed);
// batch dims broadcast. Inputs must share a floating dtype.
absl::StatusOr<Tensor> matmul(const Tensor& a, const Tensor& b,
                              const MatmulOptions& options = {});

// x [..., in] @ weight[out, in]^T + bias[out], like torch.nn.functional.linear.
// `bias` may be undefined.
absl::StatusOr<Tensor> linear(const Tensor& x, const Tensor& weight,
                              const Tensor& bias,
                              const MatmulOptions& options = {});

}  // namespace mixrt::kernels

#endif  // MIXRT_CORE_KERNELS_MATMUL_H_
