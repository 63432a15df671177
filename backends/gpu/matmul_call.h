// The operands of one MIXRT_OP_MATMUL launch, checked: in0 [..., M, K],
// in1 [..., K, N], optional bias [N], out [..., M, N] with the same batch
// dims, all contiguous (the GPU plugins ask for contiguous tensors).
#ifndef MIXRT_BACKENDS_GPU_MATMUL_CALL_H_
#define MIXRT_BACKENDS_GPU_MATMUL_CALL_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "backends/gpu/device_tensor.h"
#include "backends/gpu/gemm_epilogue.h"
#include "plugins/sdk/plugin.h"

namespace mixrt::gpu {

struct MatmulCall {
  DeviceTensor a;  // in0
  DeviceTensor b;  // in1
  DeviceTensor out;
  GemmEpilogue epilogue;  // bias, activation and beta, as the call gives them
  int64_t m = 0, n = 0, k = 0, batch = 1;
};

absl::StatusOr<MatmulCall> ParseMatmulCall(const sdk::KernelCall& call);

}  // namespace mixrt::gpu

#endif  // MIXRT_BACKENDS_GPU_MATMUL_CALL_H_
