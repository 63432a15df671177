// 2-d convolution over NCHW tensors, with its two backward kernels.
#ifndef MIXRT_CORE_KERNELS_CONV2D_H_
#define MIXRT_CORE_KERNELS_CONV2D_H_

#include <array>

#include "absl/status/statusor.h"
#include "core/kernels/op_options.h"
#include "core/tensor/tensor.h"
#include "mixrt/plugin_api.h"

namespace mixrt::kernels {

// x [N, C, H, W], weight [O, C / groups, kh, kw], bias [O] or undefined.
absl::StatusOr<Tensor> conv2d(const Tensor& x, const Tensor& weight,
                              const Tensor& bias,
                              const Conv2dOptions& options = {});
// d loss / d x, given d loss / d out, for the input shape `x_shape`.
absl::StatusOr<Tensor> conv2d_backward_data(const Tensor& grad_out,
                                            const Tensor& weight,
                                            absl::Span<const int64_t> x_shape,
                                            const Conv2dOptions& options = {});

struct Conv2dWeightGrads {
  Tensor grad_weight;
  Tensor grad_bias;  // Defined when asked for.
};
absl::StatusOr<Conv2dWeightGrads> conv2d_backward_weights(
    const Tensor& grad_out, const Tensor& x,
    absl::Span<const int64_t> weight_shape, bool with_bias,
    const Conv2dOptions& options = {});

// The output size of one spatial dim.
int64_t Conv2dOutputSize(int64_t in, int64_t kernel, int32_t stride,
                         int32_t padding, int32_t dilation);

}  // namespace mixrt::kernels

#endif  // MIXRT_CORE_KERNELS_CONV2D_H_
