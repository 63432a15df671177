// Fused scaled dot-product attention, forward and backward. Each takes a call
// whose tensors the plugin has already validated against the ABI.
#ifndef MIXRT_BACKENDS_CPU_KERNELS_CPU_ATTENTION_H_
#define MIXRT_BACKENDS_CPU_KERNELS_CPU_ATTENTION_H_

#include "absl/status/status.h"
#include "plugins/sdk/plugin.h"

namespace mixrt::cpu {

absl::Status RunAttention(const sdk::KernelCall& call);  // fused SDPA, dense

}  // namespace mixrt::cpu

#endif  // MIXRT_BACKENDS_CPU_KERNELS_CPU_ATTENTION_H_
