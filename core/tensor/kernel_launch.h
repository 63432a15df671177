// Launches a core op on the device of its tensors, honouring the device's
// MIXRT_DEVICE_FLAG_NEEDS_CONTIGUOUS (inputs are made contiguous, outputs
// written through a contiguous temporary).
#ifndef MIXRT_CORE_TENSOR_KERNEL_LAUNCH_H_
#define MIXRT_CORE_TENSOR_KERNEL_LAUNCH_H_

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "core/tensor/tensor.h"
#include "mixrt/plugin_api.h"

namespace mixrt {

// All tensors must be on one device (the outputs'); the message names the
// op and both devices otherwise.
absl::Status LaunchKernel(MixrtOp op, absl::Span<const Tensor> inputs,
                          absl::Span<const Tensor> outputs,
                          const void* attrs = nullptr);

}  // namespace mixrt

#endif  // MIXRT_CORE_TENSOR_KERNEL_LAUNCH_H_
