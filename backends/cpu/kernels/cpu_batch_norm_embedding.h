// batch_norm and embedding with their backwards. Each takes a call whose
// tensors the plugin has already validated against the ABI.
#ifndef MIXRT_BACKENDS_CPU_KERNELS_CPU_BATCH_NORM_EMBEDDING_H_
#define MIXRT_BACKENDS_CPU_KERNELS_CPU_BATCH_NORM_EMBEDDING_H_

#include "absl/status/status.h"
#include "plugins/sdk/plugin.h"

namespace mixrt::cpu {

absl::Status RunBatchNorm(const sdk::KernelCall& call);
absl::Status RunBatchNormBackward(const sdk::KernelCall& call);
absl::Status RunEmbedding(const sdk::KernelCall& call);
absl::Status RunEmbeddingBackward(const sdk::KernelCall& call);  // dense

}  // namespace mixrt::cpu

#endif  // MIXRT_BACKENDS_CPU_KERNELS_CPU_BATCH_NORM_EMBEDDING_H_
