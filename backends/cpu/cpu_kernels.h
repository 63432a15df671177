// The CPU plugin's kernels, one group per file. Each takes a call whose
// tensors the plugin has already validated against the ABI.
#ifndef MIXRT_BACKENDS_CPU_CPU_KERNELS_H_
#define MIXRT_BACKENDS_CPU_CPU_KERNELS_H_

#include <string>

#include "absl/status/status.h"
#include "plugins/sdk/plugin.h"

namespace mixrt::cpu {

absl::Status RunKernel(const sdk::KernelCall& call);

absl::Status RunCreation(const sdk::KernelCall& call);     // fill, copy, ...
absl::Status RunPointwise(const sdk::KernelCall& call);    // dense tensors
absl::Status RunReduce(const sdk::KernelCall& call);
// The total L2 norm of many tensors (ABI 1.1).
absl::Status RunMultiTensorNorm(const sdk::KernelCall& call);       // dense tensors
absl::Status RunMatmul(const sdk::KernelCall& call);       // strided ok
absl::Status RunSoftmaxNorm(const sdk::KernelCall& call);  // dense tensors
absl::Status RunLoss(const sdk::KernelCall& call);         // dense tensors
absl::Status RunOptimizer(const sdk::KernelCall& call);    // dense tensors
absl::Status RunConv(const sdk::KernelCall& call);         // strided ok
absl::Status RunPool(const sdk::KernelCall& call);         // dense tensors
absl::Status RunBatchNormEmbedding(const sdk::KernelCall& call);  // dense
absl::Status RunAttention(const sdk::KernelCall& call);  // fused SDPA, dense
absl::Status RunDropout(const sdk::KernelCall& call);    // dense tensors

// The oneDNN matmul implementation for `dtype` inputs (f32 output), e.g.
// "brg:avx512_core_bf16", or "" when this build and CPU have none.
std::string OneDnnMatmulImplementation(MixrtDtype dtype);
// Whether matmul runs `dtype` on oneDNN directly (else widened to f32).
bool OneDnnHasMatmul(MixrtDtype dtype);
// Whether f16 matmuls run as three bf16 products of split operands
// (bf16_pair.h) on AMX: this oneDNN has no f16 matmul and its bf16 matmul
// runs on AMX tiles (4x its f32 speed on Sapphire Rapids; avx512_bf16
// alone, at ~2x, would lose to one f32 product).
bool F16MatmulByBf16Pairs();

}  // namespace mixrt::cpu

#endif  // MIXRT_BACKENDS_CPU_CPU_KERNELS_H_
