// Fused per-parameter optimizer steps, as PyTorch's fused SGD/AdamW: the
// gradient is divided by grad_scale and the whole step skipped when
// found_inf is nonzero, both read on the device.
#ifndef MIXRT_CORE_KERNELS_OPTIMIZER_KERNELS_H_
#define MIXRT_CORE_KERNELS_OPTIMIZER_KERNELS_H_

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "core/tensor/tensor.h"
#include "mixrt/plugin_api.h"

namespace mixrt::kernels {

// Optional device scalars; undefined tensors mean "none".
struct StepScaling {
  Tensor grad_scale;  // f32 [1]
  Tensor found_inf;   // f32 [1]
};

// param (f32) and momentum_buffer (f32, undefined when momentum == 0) are
// updated in place. attrs.flags is filled from `scaling`.
absl::Status sgd_step_(const Tensor& param, const Tensor& grad,
                       const Tensor& momentum_buffer, MixrtSgdAttrs attrs,
                       const StepScaling& scaling = {});

// Every params[i] stepped as sgd_step_(params[i], grads[i],
// momentum_buffers[i], attrs, scaling) would step it, in one launch
// (MIXRT_OP_MULTI_TENSOR_SGD_STEP) where the device has it, else one
// launch per parameter. momentum_buffers is empty when momentum == 0.
// Everything is checked before anything changes.
absl::Status multi_tensor_sgd_step_(absl::Span<const Tensor> params,
                                    absl::Span<const Tensor> grads,
                                    absl::Span<const Tensor> momentum_buffers,
                                    MixrtSgdAttrs attrs,
                                    const StepScaling& scaling = {});

// param, exp_avg, exp_avg_sq (f32) and step (f32 [1]) updated in place.
// With max_exp_avg_sq defined (f32, the param's shape): AMSGrad
// (MIXRT_OPTIM_AMSGRAD, ABI 1.2), refused on an older plugin that would
// not know the flag.
absl::Status adamw_step_(const Tensor& param, const Tensor& grad,
                         const Tensor& exp_avg, const Tensor& exp_avg_sq,
                         const Tensor& step, MixrtAdamWAttrs attrs,
                         const StepScaling& scaling = {},
                         const Tensor& max_exp_avg_sq = Tensor());

}  // namespace mixrt::kernels

#endif  // MIXRT_CORE_KERNELS_OPTIMIZER_KERNELS_H_
