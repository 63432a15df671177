// The largest magnitude in a tensor, for proving that a computation cannot
// make a NaN (fused_conv.h: a relu post-op that would turn it into 0 is
// used only then).
#ifndef MIXRT_BACKENDS_CPU_KERNELS_MAX_MAGNITUDE_H_
#define MIXRT_BACKENDS_CPU_KERNELS_MAX_MAGNITUDE_H_

#include "plugins/sdk/tensor_ref.h"

namespace mixrt::cpu {

// max |v| over the elements `t` addresses (a broadcast dim's one element
// once), as a double; +inf when any is NaN or infinite, 0 for none. f32
// and bf16 read as bits (a magnitude's bits order as its value), in
// parallel when large.
double MaxMagnitude(const sdk::TensorRef& t);

}  // namespace mixrt::cpu

#endif  // MIXRT_BACKENDS_CPU_KERNELS_MAX_MAGNITUDE_H_
