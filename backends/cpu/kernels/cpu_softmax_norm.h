// softmax, log_softmax and layer_norm with their backwards. Each takes a call
// whose tensors the plugin has already validated against the ABI.
#ifndef MIXRT_BACKENDS_CPU_KERNELS_CPU_SOFTMAX_NORM_H_
#define MIXRT_BACKENDS_CPU_KERNELS_CPU_SOFTMAX_NORM_H_

#include "absl/status/status.h"
#include "plugins/sdk/plugin.h"

namespace mixrt::cpu {

absl::Status RunSoftmaxNorm(const sdk::KernelCall& call);  // dense tensors

}  // namespace mixrt::cpu

#endif  // MIXRT_BACKENDS_CPU_KERNELS_CPU_SOFTMAX_NORM_H_
