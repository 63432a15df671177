// softmax, log_softmax and layer_norm with their backwards. Each takes a call
// whose tensors the plugin has already validated against the ABI.
#ifndef MIXRT_BACKENDS_CPU_KERNELS_CPU_SOFTMAX_NORM_H_
#define MIXRT_BACKENDS_CPU_KERNELS_CPU_SOFTMAX_NORM_H_

#include "absl/status/status.h"
#include "plugins/sdk/plugin.h"

namespace mixrt::cpu {

// softmax and log_softmax (the op says which), and their backwards.
absl::Status RunSoftmax(const sdk::KernelCall& call);
absl::Status RunSoftmaxBackward(const sdk::KernelCall& call);
absl::Status RunLayerNorm(const sdk::KernelCall& call);
absl::Status RunLayerNormBackward(const sdk::KernelCall& call);

}  // namespace mixrt::cpu

#endif  // MIXRT_BACKENDS_CPU_KERNELS_CPU_SOFTMAX_NORM_H_
