// The CPU plugin's op dispatch: each op's call to the kernel of its group
// (kernels/cpu_<group>.h), with strided operands made dense for the kernels
// that need it.
#ifndef MIXRT_BACKENDS_CPU_KERNELS_CPU_KERNELS_H_
#define MIXRT_BACKENDS_CPU_KERNELS_CPU_KERNELS_H_

#include "absl/status/status.h"
#include "plugins/sdk/plugin.h"

namespace mixrt::cpu {

absl::Status RunKernel(const sdk::KernelCall& call);

}  // namespace mixrt::cpu

#endif  // MIXRT_BACKENDS_CPU_KERNELS_CPU_KERNELS_H_
