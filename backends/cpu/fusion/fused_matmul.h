// GEMM epilogue fusion (ABI 1.1) on the CPU plugin: a matmul and the chain
// of ops that only it feeds (activations, scale, a residual or broadcast
// add/sub/mul, casts to f32 or the operands' dtype) run as one oneDNN
// matmul whose post-ops apply the chain to each output tile while it is in
// registers: the product never makes a round trip through memory, and the
// intermediates the chain rounded to bf16 op by op stay f32 (so a fused
// result differs from op by op by at most those roundings).
//
// An eltwise post-op is used only where this oneDNN keeps what the op-by-op
// kernel gives for NaN and infinities (probed once per function: oneDNN
// 2.6.3's relu maps NaN to 0, which would hide an overflow from the grad
// scaler), and a chain only where oneDNN runs it on an optimized kernel,
// never its reference loops.
#ifndef MIXRT_BACKENDS_CPU_FUSION_FUSED_MATMUL_H_
#define MIXRT_BACKENDS_CPU_FUSION_FUSED_MATMUL_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "backends/cpu/fusion/epilogue_chain.h"
#include "oneapi/dnnl/dnnl.hpp"
#include "plugins/sdk/fusion.h"
#include "plugins/sdk/tensor_ref.h"

namespace mixrt::cpu {

// Whether oneDNN's eltwise post-op `algorithm` gives what op `kind`
// (MixrtUnaryKind) gives for NaN, +inf and -inf.
bool PostOpKeepsSpecials(dnnl::algorithm algorithm, float alpha, float beta,
                         uint32_t kind);

// Claims a group per matmul and the chain it feeds, or a matmul alone
// whose b is a WEIGHT (the kernel packs it into oneDNN's preferred layout
// once per weight version), and compiles it as one oneDNN matmul with
// post-ops.
extern const EpiloguePattern kMatmulEpilogues;

}  // namespace mixrt::cpu

#endif  // MIXRT_BACKENDS_CPU_FUSION_FUSED_MATMUL_H_
