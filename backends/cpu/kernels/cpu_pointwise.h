// Pointwise ops: binary, unary and its backward, compare, where. Each takes a
// call whose tensors the plugin has already validated against the ABI.
#ifndef MIXRT_BACKENDS_CPU_KERNELS_CPU_POINTWISE_H_
#define MIXRT_BACKENDS_CPU_KERNELS_CPU_POINTWISE_H_

#include "absl/status/status.h"
#include "plugins/sdk/plugin.h"

namespace mixrt::cpu {

absl::Status RunBinary(const sdk::KernelCall& call);
absl::Status RunUnary(const sdk::KernelCall& call);
absl::Status RunUnaryBackward(const sdk::KernelCall& call);
absl::Status RunCompare(const sdk::KernelCall& call);
absl::Status RunWhere(const sdk::KernelCall& call);

}  // namespace mixrt::cpu

#endif  // MIXRT_BACKENDS_CPU_KERNELS_CPU_POINTWISE_H_
