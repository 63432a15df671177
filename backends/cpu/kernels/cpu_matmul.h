// Matrix products on oneDNN, and what oneDNN offers for them. Each takes a call
// whose tensors the plugin has already validated against the ABI.
#ifndef MIXRT_BACKENDS_CPU_KERNELS_CPU_MATMUL_H_
#define MIXRT_BACKENDS_CPU_KERNELS_CPU_MATMUL_H_

#include <string>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "backends/cpu/kernels/epilogue.h"
#include "oneapi/dnnl/dnnl.hpp"
#include "plugins/sdk/plugin.h"
#include "plugins/sdk/tensor_ref.h"

namespace mixrt::cpu {

absl::Status RunMatmul(const sdk::KernelCall& call);  // strided ok

// The oneDNN matmul implementation for `dtype` inputs (f32 output), e.g.
// "brg:avx512_core_bf16", or "" when this build and CPU have none.
std::string OneDnnMatmulImplementation(MixrtDtype dtype);
// Whether matmul runs `dtype` on oneDNN directly (else widened to f32).
bool OneDnnHasMatmul(MixrtDtype dtype);
// Whether matmul runs `dtype` natively on the oneDNN 3.x companion
// (onednn3_companion.h) because the plugin's own oneDNN has no such
// product: f16 on avx512_fp16 CPUs. Its reference loops ("ref:") do not
// count: they are slower than widening to f32.
bool MatmulOnCompanion(MixrtDtype dtype);
// OneDnnMatmulImplementation, else the companion's, said as such
// ("brg:avx512_core_fp16 (oneDNN 3.2.0 companion)"); "" when neither.
std::string MatmulImplementation(MixrtDtype dtype);
// Whether f16 matmuls can run as three bf16 products of split operands
// (bf16_pair.h) on AMX: this oneDNN has no f16 matmul and its bf16 matmul
// runs on AMX tiles (4x its f32 speed on Sapphire Rapids; avx512_bf16
// alone, at ~2x, would lose to one f32 product).
bool F16MatmulByBf16PairsPossible();
// Whether they do: possible and chosen. The speed probe chooses by timing
// both ways (matmul_speed_probe.h): on an Emerald Rapids Xeon the three
// products (and the splits) took 1.9x one f32 product of widened operands
// at 512 x 2048 x 2048. Until a choice is made, possible.
bool F16MatmulByBf16Pairs();
void SetF16MatmulByBf16Pairs(bool use);

// out = steps(a x b + bias) on oneDNN (cpu_matmul.cc). out is f32 or a's
// dtype. With `packed_b` (PackMatmulWeights' result), b's data is not
// read; FAILED_PRECONDITION when the product now wants another layout.
absl::Status RunMatmulWithEpilogue(const sdk::TensorRef& a,
                                   const sdk::TensorRef& b,
                                   const sdk::TensorRef* bias,
                                   const sdk::TensorRef& out,
                                   absl::Span<const EpilogueStep> steps,
                                   const dnnl::memory* packed_b = nullptr);
// The oneDNN implementation that product gets ("" when none).
std::string MatmulWithEpilogueImplementation(
    const sdk::TensorRef& a, const sdk::TensorRef& b,
    const sdk::TensorRef* bias, const sdk::TensorRef& out,
    absl::Span<const EpilogueStep> steps, bool packed_b = false);
// b in the layout oneDNN prefers for that product, into `packed` (made or
// remade to fit).
absl::Status PackMatmulWeights(const sdk::TensorRef& a, const sdk::TensorRef& b,
                               const sdk::TensorRef* bias,
                               const sdk::TensorRef& out,
                               absl::Span<const EpilogueStep> steps,
                               dnnl::memory* packed);

// PackMatmulWeights from an earlier packed copy (in any layout) instead
// of b's data, which is not read.
absl::Status RepackMatmulWeights(const sdk::TensorRef& a,
                                 const sdk::TensorRef& b,
                                 const sdk::TensorRef* bias,
                                 const sdk::TensorRef& out,
                                 absl::Span<const EpilogueStep> steps,
                                 const dnnl::memory& from,
                                 dnnl::memory* packed);

}  // namespace mixrt::cpu

#endif  // MIXRT_BACKENDS_CPU_KERNELS_CPU_MATMUL_H_
