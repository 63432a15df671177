// Pointwise ops on oneDNN's eltwise and binary primitives, for f32 and bf16
// dense tensors. Each returns false when oneDNN has no primitive for the
// kind, dtype or ISA; the caller then runs its own loop.
#ifndef MIXRT_BACKENDS_CPU_ONEDNN_ONEDNN_POINTWISE_H_
#define MIXRT_BACKENDS_CPU_ONEDNN_ONEDNN_POINTWISE_H_

#include "plugins/sdk/plugin.h"

namespace mixrt::cpu {

// MIXRT_OP_UNARY (backward = false) or MIXRT_OP_UNARY_BACKWARD.
bool OneDnnUnary(const sdk::KernelCall& call, const MixrtPointwiseAttrs& attrs,
                 bool backward);
// MIXRT_OP_BINARY.
bool OneDnnBinary(const sdk::KernelCall& call, MixrtBinaryKind kind);

}  // namespace mixrt::cpu

#endif  // MIXRT_BACKENDS_CPU_ONEDNN_ONEDNN_POINTWISE_H_
