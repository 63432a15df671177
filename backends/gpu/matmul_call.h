// The operands of one MIXRT_OP_MATMUL launch, checked: in0 [..., M, K],
// in1 [..., K, N], optional bias [N], out [..., M, N] with the same batch
// dims, all contiguous (the GPU plugins ask for contiguous tensors), except
// in0 and in1 transposed where the plugin allows it.
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
  // in0 / in1 is the transpose of a dense row-major buffer
  // (IsTransposedDenseMatrix); only when the caller allows it.
  bool a_transposed = false, b_transposed = false;
};

// `allow_transposed`: the plugin sets MIXRT_DEVICE_FLAG_MATMUL_TRANSPOSED_
// OPERANDS and reads such operands as op T; otherwise every operand must be
// dense row-major.
absl::StatusOr<MatmulCall> ParseMatmulCall(const sdk::KernelCall& call,
                                           bool allow_transposed = false);

}  // namespace mixrt::gpu

#endif  // MIXRT_BACKENDS_GPU_MATMUL_CALL_H_
