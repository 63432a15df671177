// Max and average 2-d pooling over NCHW tensors, with the backward kernel.
#ifndef MIXRT_CORE_KERNELS_POOL2D_H_
#define MIXRT_CORE_KERNELS_POOL2D_H_

#include <array>

#include "absl/status/statusor.h"
#include "core/kernels/op_options.h"
#include "core/tensor/tensor.h"
#include "mixrt/plugin_api.h"

namespace mixrt::kernels {

absl::StatusOr<Tensor> pool2d(const Tensor& x, const Pool2dOptions& options);
absl::StatusOr<Tensor> pool2d_backward(const Tensor& grad_out, const Tensor& x,
                                       const Pool2dOptions& options);

}  // namespace mixrt::kernels

#endif  // MIXRT_CORE_KERNELS_POOL2D_H_
