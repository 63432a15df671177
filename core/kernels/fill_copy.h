// In-place writes into an existing tensor (a view included), through the
// device's kernels: what optimizers, the grad scaler and gradient clipping
// use to change a tensor others hold, instead of raw backend copies.
//
//   MIXRT_RETURN_IF_ERROR(mixrt::kernels::fill_(scale, 1024.0));
//   MIXRT_RETURN_IF_ERROR(mixrt::kernels::copy_(grad, clipped));
#ifndef MIXRT_CORE_KERNELS_FILL_COPY_H_
#define MIXRT_CORE_KERNELS_FILL_COPY_H_

#include "absl/status/status.h"
#include "core/tensor/tensor.h"

namespace mixrt::kernels {

// Every element of `dst` set to `value` (converted to dst's dtype).
absl::Status fill_(const Tensor& dst, double value);
// dst[i] = convert(src[i]); same shape and device, any dtypes.
absl::Status copy_(const Tensor& dst, const Tensor& src);

}  // namespace mixrt::kernels

#endif  // MIXRT_CORE_KERNELS_FILL_COPY_H_
