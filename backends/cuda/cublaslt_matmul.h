// Runs planned matmuls through cuBLASLt on one device: the handle, the
// workspace, and the heuristic's algorithm choice cached per plan.
#ifndef MIXRT_BACKENDS_CUDA_CUBLASLT_MATMUL_H_
#define MIXRT_BACKENDS_CUDA_CUBLASLT_MATMUL_H_

#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include <mutex>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "backends/cuda/cublaslt_plan.h"

namespace mixrt::cuda {

class CublasLtMatmul {
 public:
  // cuBLASLt's recommendation for Hopper; enough for every algorithm it
  // picks on older parts too.
  static constexpr size_t kWorkspaceBytes = 32u << 20;

  // Creates the handle and workspace on the current device.
  static absl::StatusOr<std::unique_ptr<CublasLtMatmul>> Create();
  ~CublasLtMatmul();

  // d = plan(a, b) (+ beta c, the fused epilogue with `bias`). a is the
  // library's first operand (our in1), b our in0.
  absl::Status Run(const CublasLtPlan& plan, const void* a, const void* b,
                   const void* c, void* d, const void* bias,
                   cudaStream_t stream);

  size_t cached_algorithms() const;

 private:
  CublasLtMatmul(cublasLtHandle_t handle, void* workspace)
      : handle_(handle), workspace_(workspace) {}
  absl::StatusOr<cublasLtMatmulAlgo_t> Algorithm(
      const CublasLtPlan& plan, const OperandAlignment& alignment,
      cublasLtMatmulDesc_t desc, cublasLtMatrixLayout_t a,
      cublasLtMatrixLayout_t b, cublasLtMatrixLayout_t c);

  cublasLtHandle_t handle_;
  void* workspace_;
  mutable std::mutex mutex_;
  absl::flat_hash_map<std::string, cublasLtMatmulAlgo_t> algorithms_;
};

}  // namespace mixrt::cuda

#endif  // MIXRT_BACKENDS_CUDA_CUBLASLT_MATMUL_H_
