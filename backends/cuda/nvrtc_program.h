// NVRTC, loaded at run time: generated CUDA source (fused loops) compiled
// to PTX in the process. It needs no GPU, so the host build checks that
// what a GPU would run compiles; the plugin still loads where NVRTC is
// missing (the error says so, and the groups run op by op).
#ifndef MIXRT_BACKENDS_CUDA_NVRTC_PROGRAM_H_
#define MIXRT_BACKENDS_CUDA_NVRTC_PROGRAM_H_

#include <string>

#include "absl/status/statusor.h"

namespace mixrt::cuda {

// PTX for `source` (its file name in messages: `name`) for a virtual
// architecture such as "compute_90". Compile errors carry NVRTC's log.
absl::StatusOr<std::string> CompileToPtx(const std::string& source,
                                         const std::string& name,
                                         const std::string& arch);

}  // namespace mixrt::cuda

#endif  // MIXRT_BACKENDS_CUDA_NVRTC_PROGRAM_H_
