// The CPU plugin's op dispatch: each op's call to the kernel of its group
// (kernels/cpu_<group>.h), with strided operands made dense for the kernels
// that need it.
#ifndef MIXRT_BACKENDS_CPU_KERNELS_CPU_KERNELS_H_
#define MIXRT_BACKENDS_CPU_KERNELS_CPU_KERNELS_H_

#include "absl/status/status.h"
#include "plugins/sdk/op_table.h"
#include "plugins/sdk/plugin.h"

namespace mixrt::cpu {

absl::Status RunKernel(const sdk::KernelCall& call);

// The kernels RunKernel dispatches to, one row per op (what the plugin
// claims per op). Its kernels take integer tensors where the op allows.
const sdk::OpTable& CpuOps();

}  // namespace mixrt::cpu

#endif  // MIXRT_BACKENDS_CPU_KERNELS_CPU_KERNELS_H_
