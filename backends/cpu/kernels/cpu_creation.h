// Creation ops: fill, copy, arange, random uniform and normal. Each takes a
// call whose tensors the plugin has already validated against the ABI.
#ifndef MIXRT_BACKENDS_CPU_KERNELS_CPU_CREATION_H_
#define MIXRT_BACKENDS_CPU_KERNELS_CPU_CREATION_H_

#include "absl/status/status.h"
#include "plugins/sdk/plugin.h"

namespace mixrt::cpu {

absl::Status RunFill(const sdk::KernelCall& call);
absl::Status RunCopy(const sdk::KernelCall& call);  // Strided in and out.
absl::Status RunArange(const sdk::KernelCall& call);
absl::Status RunRandomUniform(const sdk::KernelCall& call);
absl::Status RunRandomNormal(const sdk::KernelCall& call);

}  // namespace mixrt::cpu

#endif  // MIXRT_BACKENDS_CPU_KERNELS_CPU_CREATION_H_
