// The grad scaler's device kernels (torch._amp_foreach_non_finite_check_and_
// unscale_ and torch._amp_update_scale_): no host synchronization per tensor.
#ifndef MIXRT_CORE_KERNELS_AMP_KERNELS_H_
#define MIXRT_CORE_KERNELS_AMP_KERNELS_H_

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "core/tensor/tensor.h"

namespace mixrt::kernels {

// grads[i] *= inv_scale in place; found_inf (f32 [1]) is set to 1 if any
// element of any gradient is inf or NaN. All on one device.
absl::Status non_finite_check_and_unscale_(absl::Span<const Tensor> grads,
                                           const Tensor& found_inf,
                                           const Tensor& inv_scale);

// scale (f32 [1]) and growth_tracker (i32 [1]) updated in place from
// found_inf (f32 [1]).
absl::Status update_scale_(const Tensor& scale, const Tensor& growth_tracker,
                           const Tensor& found_inf, double growth_factor,
                           double backoff_factor, int32_t growth_interval);

}  // namespace mixrt::kernels

#endif  // MIXRT_CORE_KERNELS_AMP_KERNELS_H_
