// Naive, portable kernels of the reference plugin: the numerical oracle.
// Floating math runs in f32 (f16/bf16 load exactly, store rounded to nearest
// even); integer math runs in int64 with two's-complement wrap.
#ifndef MIXRT_PLUGINS_REFERENCE_REFERENCE_KERNELS_H_
#define MIXRT_PLUGINS_REFERENCE_REFERENCE_KERNELS_H_

#include "absl/status/status.h"
#include "plugins/sdk/plugin.h"

namespace mixrt::reference {

absl::Status RunKernel(const sdk::KernelCall& call);

}  // namespace mixrt::reference

#endif  // MIXRT_PLUGINS_REFERENCE_REFERENCE_KERNELS_H_
