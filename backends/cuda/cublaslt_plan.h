// How one MIXRT_OP_MATMUL maps onto cublasLtMatmul: a pure function, tested
// on the CPU.
//
// mixrt tensors are row-major and cuBLASLt is column-major. A row-major
// X [r, c] is the column-major X^T [c, r] with leading dimension c, so
// C = A B (row-major) is computed as C^T = B^T A^T (column-major): the
// library's first operand is our B, its m is our N and its n our M, and a
// bias over our columns is a bias over its rows, which is what its BIAS
// epilogues add.
#ifndef MIXRT_BACKENDS_CUDA_CUBLASLT_PLAN_H_
#define MIXRT_BACKENDS_CUDA_CUBLASLT_PLAN_H_

#include <cublasLt.h>

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "mixrt/plugin_api.h"

namespace mixrt::cuda {

struct MatmulProblem {
  int64_t m = 0;  // Row-major: out [batch, m, n] = in0 [batch, m, k] @ in1.
  int64_t n = 0;
  int64_t k = 0;
  int64_t batch = 1;
  MixrtDtype input_dtype = MIXRT_DTYPE_F32;
  MixrtDtype output_dtype = MIXRT_DTYPE_F32;
  bool has_bias = false;
  MixrtDtype bias_dtype = MIXRT_DTYPE_F32;
  MixrtActivation activation = MIXRT_ACTIVATION_NONE;
  float beta = 0.0f;
  bool allow_tf32 = false;
  // in0 / in1 is stored transposed: [m, k] with strides (1, m), [k, n] with
  // strides (1, k) (IsTransposedDenseMatrix).
  bool a_transposed = false;
  bool b_transposed = false;
};

struct CublasLtPlan {
  // Column-major problem handed to cuBLASLt: D [m x n] = A [m x k] B [k x n]
  // with A = our in1 and B = our in0.
  uint64_t m = 0, n = 0, k = 0;
  // op T for the library's A (our in1 stored transposed) or B (our in0):
  // the layout is then the stored matrix, k x m or m x k.
  bool trans_a = false, trans_b = false;
  int64_t lda = 0, ldb = 0, ldc = 0;
  int32_t batch = 1;
  int64_t stride_a = 0, stride_b = 0, stride_c = 0;
  cudaDataType_t ab_type = CUDA_R_32F;
  cudaDataType_t cd_type = CUDA_R_32F;
  cublasComputeType_t compute = CUBLAS_COMPUTE_32F;
  cudaDataType_t scale_type = CUDA_R_32F;
  cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_DEFAULT;
  float beta = 0.0f;  // Passed to cuBLASLt.
  // True when cuBLASLt cannot express the epilogue: it then writes the bare
  // product (f32, into a scratch buffer) and GemmEpilogueFunctor finishes.
  bool separate_epilogue = false;
  // True when ReLU follows as an in-place, NaN-keeping pass over the output
  // (cuBLASLt's own ReLU epilogue maps NaN to 0).
  bool relu_pass = false;
  // Identifies the plan for the per-shape algorithm cache.
  std::string cache_key;
};

absl::StatusOr<CublasLtPlan> PlanCublasLtMatmul(const MatmulProblem& p);

// The largest power of two, at most 256, that divides the address. cuBLASLt's
// heuristic assumes 256-byte aligned operands unless told otherwise, and a
// view into a tensor (a slice, a batch element) can be less aligned.
uint32_t PointerAlignment(const void* pointer);

// Alignments of the four operands as the heuristic is told them; part of the
// algorithm cache key, since a less aligned call needs another algorithm.
struct OperandAlignment {
  uint32_t a = 256, b = 256, c = 256, d = 256;
  std::string Key() const;
};

}  // namespace mixrt::cuda

#endif  // MIXRT_BACKENDS_CUDA_CUBLASLT_PLAN_H_
