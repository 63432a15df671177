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
#ifndef MIXRT_BACKENDS_CPU_FUSED_MATMUL_H_
#define MIXRT_BACKENDS_CPU_FUSED_MATMUL_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "backends/cpu/epilogue_chain.h"
#include "oneapi/dnnl/dnnl.hpp"
#include "plugins/sdk/fusion.h"
#include "plugins/sdk/tensor_ref.h"

namespace mixrt::cpu {

// out = steps(a x b + bias) on oneDNN (cpu_matmul.cc). out is f32 or a's
// dtype. With `packed_b` (PackMatmulWeights' result), b's data is not
// read; FAILED_PRECONDITION when the product now wants another layout.
absl::Status RunMatmulWithEpilogue(const sdk::TensorRef& a, const sdk::TensorRef& b,
                                   const sdk::TensorRef* bias, const sdk::TensorRef& out,
                                   absl::Span<const EpilogueStep> steps,
                                   const dnnl::memory* packed_b = nullptr);
// The oneDNN implementation that product gets ("" when none).
std::string MatmulWithEpilogueImplementation(const sdk::TensorRef& a,
                                             const sdk::TensorRef& b,
                                             const sdk::TensorRef* bias,
                                             const sdk::TensorRef& out,
                                             absl::Span<const EpilogueStep> steps,
                                             bool packed_b = false);
// b in the layout oneDNN prefers for that product, into `packed` (made or
// remade to fit).
absl::Status PackMatmulWeights(const sdk::TensorRef& a, const sdk::TensorRef& b,
                               const sdk::TensorRef* bias, const sdk::TensorRef& out,
                               absl::Span<const EpilogueStep> steps, dnnl::memory* packed);

// PackMatmulWeights from an earlier packed copy (in any layout) instead
// of b's data, which is not read.
absl::Status RepackMatmulWeights(const sdk::TensorRef& a, const sdk::TensorRef& b,
                                 const sdk::TensorRef* bias, const sdk::TensorRef& out,
                                 absl::Span<const EpilogueStep> steps, const dnnl::memory& from,
                                 dnnl::memory* packed);

// Whether oneDNN's eltwise post-op `algorithm` gives what op `kind`
// (MixrtUnaryKind) gives for NaN, +inf and -inf.
bool PostOpKeepsSpecials(dnnl::algorithm algorithm, float alpha, float beta,
                         uint32_t kind);

// Per node of `graph`, its group (0, 1, ...) or -1: each group a matmul and
// the chain it feeds, or a matmul alone whose b is a WEIGHT (the kernel
// packs it into oneDNN's preferred layout once per weight version).
std::vector<int> ClaimMatmulEpilogues(const sdk::FusionGraph& graph);

absl::StatusOr<std::unique_ptr<sdk::FusedKernel>> CompileFusedMatmul(
    const sdk::FusionGraph& graph, absl::Span<const int> group_of_node, int group);

}  // namespace mixrt::cpu

#endif  // MIXRT_BACKENDS_CPU_FUSED_MATMUL_H_
