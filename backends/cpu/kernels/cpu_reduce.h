// Reductions, and the total L2 norm of many tensors. Each takes a call whose
// tensors the plugin has already validated against the ABI.
#ifndef MIXRT_BACKENDS_CPU_KERNELS_CPU_REDUCE_H_
#define MIXRT_BACKENDS_CPU_KERNELS_CPU_REDUCE_H_

#include "absl/status/status.h"
#include "plugins/sdk/plugin.h"

namespace mixrt::cpu {

absl::Status RunReduce(const sdk::KernelCall& call);
// The total L2 norm of many tensors (ABI 1.1).
absl::Status RunMultiTensorNorm(const sdk::KernelCall& call);  // dense tensors

}  // namespace mixrt::cpu

#endif  // MIXRT_BACKENDS_CPU_KERNELS_CPU_REDUCE_H_
