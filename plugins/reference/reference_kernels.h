// Naive, portable kernels of the reference plugin: the numerical oracle.
// Floating math runs in double and is rounded once on store (through f32 for
// f16/bf16); integer math runs in int64 with two's-complement wrap;
// reductions accumulate in double.
#ifndef MIXRT_PLUGINS_REFERENCE_REFERENCE_KERNELS_H_
#define MIXRT_PLUGINS_REFERENCE_REFERENCE_KERNELS_H_

#include "absl/status/status.h"
#include "plugins/sdk/call_checks.h"
#include "plugins/sdk/plugin.h"

namespace mixrt::reference {

absl::Status RunKernel(const sdk::KernelCall& call);

// One group per file.
absl::Status RunCreation(const sdk::KernelCall& call);   // fill, copy, ...
absl::Status RunPointwise(const sdk::KernelCall& call);  // binary, unary, ...
absl::Status RunReduce(const sdk::KernelCall& call);
absl::Status RunMultiTensorNorm(const sdk::KernelCall& call);
absl::Status RunMatmul(const sdk::KernelCall& call);
absl::Status RunSoftmaxNorm(const sdk::KernelCall& call);  // softmax, norms
absl::Status RunLoss(const sdk::KernelCall& call);
absl::Status RunOptimizer(const sdk::KernelCall& call);  // scaler, optims
absl::Status RunConvPool(const sdk::KernelCall& call);
absl::Status RunBatchNormEmbedding(const sdk::KernelCall& call);
absl::Status RunAttention(const sdk::KernelCall& call);  // fused SDPA
absl::Status RunDropout(const sdk::KernelCall& call);

using sdk::ExpectArity;
using sdk::ExpectSameShapes;

}  // namespace mixrt::reference

#endif  // MIXRT_PLUGINS_REFERENCE_REFERENCE_KERNELS_H_
