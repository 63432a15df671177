// Convolution epilogue fusion (ABI 1.1) on the CPU plugin: a conv2d and the
// chain only it feeds (an eval batch_norm's per-channel scale and shift,
// other per-channel or scalar add/sub/mul, activations, casts to f32 or the
// operands' dtype) run as one oneDNN convolution whose post-ops apply the
// chain while each output block is in registers, with the weights packed
// into oneDNN's layout once per weight version.
//
// A relu ending the chain is a post-op only where it cannot hide a NaN:
// oneDNN 2.6.3's relu post-op maps NaN to 0, which would hide an overflow
// from the grad scaler. Each run bounds the value before the relu from the
// operands' largest magnitudes, max|x| * max|w| * (C/groups * kh * kw) +
// max|bias|, carried through the chain's scales and shifts: below FLT_MAX
// (with room for rounding) no NaN can arise and the post-op relu is exact;
// otherwise (a NaN or inf operand, or a possible overflow) the chain runs
// without it and the op-by-op relu, which keeps NaN, follows.
#ifndef MIXRT_BACKENDS_CPU_FUSION_FUSED_CONV_H_
#define MIXRT_BACKENDS_CPU_FUSION_FUSED_CONV_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "backends/cpu/fusion/epilogue_chain.h"
#include "mixrt/plugin_api.h"
#include "oneapi/dnnl/dnnl.hpp"
#include "plugins/sdk/fusion.h"
#include "plugins/sdk/tensor_ref.h"

namespace mixrt::cpu {

// Claims a group per conv2d and the chain it feeds, and compiles it as one
// oneDNN convolution with post-ops (folded where it can be).
extern const EpiloguePattern kConvEpilogues;

}  // namespace mixrt::cpu

#endif  // MIXRT_BACKENDS_CPU_FUSION_FUSED_CONV_H_
