// The grad scaler's and the optimizers' steps. Each takes a call whose
// tensors the plugin has already validated against the ABI.
#ifndef MIXRT_BACKENDS_CPU_KERNELS_CPU_OPTIMIZER_H_
#define MIXRT_BACKENDS_CPU_KERNELS_CPU_OPTIMIZER_H_

#include "absl/status/status.h"
#include "plugins/sdk/plugin.h"

namespace mixrt::cpu {

absl::Status RunNonFiniteCheckAndUnscale(const sdk::KernelCall& call);
absl::Status RunUpdateScale(const sdk::KernelCall& call);
absl::Status RunSgdStep(const sdk::KernelCall& call);
absl::Status RunMultiTensorSgdStep(const sdk::KernelCall& call);
absl::Status RunAdamWStep(const sdk::KernelCall& call);

}  // namespace mixrt::cpu

#endif  // MIXRT_BACKENDS_CPU_KERNELS_CPU_OPTIMIZER_H_
