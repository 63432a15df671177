// The CUDA plugin's fusion (ABI 1.1): pointwise groups as generated
// kernels (sdk::GenerateLoopSource), compiled by NVRTC for the device's
// architecture and loaded with the runtime's library API. Reductions and
// GEMM epilogues beyond cuBLASLt's stay op by op.
#ifndef MIXRT_BACKENDS_CUDA_CUDA_FUSION_H_
#define MIXRT_BACKENDS_CUDA_CUDA_FUSION_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "plugins/sdk/fusion.h"

namespace mixrt::cuda {

// Per node, its generated kernel's group, or -1.
std::vector<int> ClaimGeneratedLoops(const sdk::FusionGraph& graph);

// The PTX and entry name of a group's kernel for `arch` ("compute_90").
struct FusedPtx {
  std::string ptx;
  std::string name;
  std::vector<int> values;  // Kernel argument k: fusion value values[k].
  int64_t numel = 0;
};
absl::StatusOr<FusedPtx> CompileGeneratedLoop(
    const sdk::FusionGraph& graph, absl::Span<const int> group_of_node,
    int group, const std::string& arch);

}  // namespace mixrt::cuda

#endif  // MIXRT_BACKENDS_CUDA_CUDA_FUSION_H_
