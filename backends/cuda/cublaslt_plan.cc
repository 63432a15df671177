#include "backends/cuda/cublaslt_plan.h"

#include <cstdint>
#include <limits>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "mixrt/status_macros.h"

namespace mixrt::cuda {
namespace {

absl::StatusOr<cudaDataType_t> CudaType(MixrtDtype dtype) {
  switch (dtype) {
    case MIXRT_DTYPE_F32:
      return CUDA_R_32F;
    case MIXRT_DTYPE_F16:
      return CUDA_R_16F;
    case MIXRT_DTYPE_BF16:
      return CUDA_R_16BF;
    default:
      return absl::InvalidArgumentError(
          absl::StrCat("matmul takes f32, f16 or bf16 tensors, not dtype ",
                       static_cast<int>(dtype)));
  }
}

// The fused epilogue for (bias, activation), or false if cuBLASLt has none
// that computes exactly ours. Its GELU is the tanh approximation, so erf
// GELU is never fused. Its ReLU is max(x, 0), which turns NaN into 0 (seen
// on an H100 in f16: conformance matmul/special_relu), where torch.relu
// keeps NaN: ReLU runs as an in-place pass over the output instead
// (*relu_pass).
bool FusedEpilogue(bool bias, MixrtActivation activation,
                   cublasLtEpilogue_t* epilogue, bool* relu_pass) {
  *relu_pass = false;
  switch (activation) {
    case MIXRT_ACTIVATION_NONE:
      *epilogue = bias ? CUBLASLT_EPILOGUE_BIAS : CUBLASLT_EPILOGUE_DEFAULT;
      return true;
    case MIXRT_ACTIVATION_RELU:
      *epilogue = bias ? CUBLASLT_EPILOGUE_BIAS : CUBLASLT_EPILOGUE_DEFAULT;
      *relu_pass = true;
      return true;
    case MIXRT_ACTIVATION_GELU_TANH:
      *epilogue = bias ? CUBLASLT_EPILOGUE_GELU_BIAS : CUBLASLT_EPILOGUE_GELU;
      return true;
    default:
      return false;
  }
}

}  // namespace

absl::StatusOr<CublasLtPlan> PlanCublasLtMatmul(const MatmulProblem& p) {
  MIXRT_ASSIGN_OR_RETURN(auto ab, CudaType(p.input_dtype));
  MIXRT_ASSIGN_OR_RETURN(auto cd, CudaType(p.output_dtype));
  if (p.output_dtype != p.input_dtype && p.output_dtype != MIXRT_DTYPE_F32) {
    return absl::InvalidArgumentError(
        "matmul output must have the inputs' dtype or f32");
  }
  if (p.m < 0 || p.n < 0 || p.k < 0 || p.batch < 1 ||
      p.batch > std::numeric_limits<int32_t>::max()) {
    return absl::InvalidArgumentError("matmul: bad problem size");
  }
  CublasLtPlan plan;
  plan.m = static_cast<uint64_t>(p.n);
  plan.n = static_cast<uint64_t>(p.m);
  plan.k = static_cast<uint64_t>(p.k);
  // in1 [k, n] row-major is column-major n x k, ld n; stored transposed
  // (a row-major [n, k] buffer) it is column-major k x n, ld k, read op T.
  plan.trans_a = p.b_transposed;
  plan.lda = p.b_transposed ? p.k : p.n;
  // in0 [m, k] row-major is column-major k x m, ld k; stored transposed it
  // is column-major m x k, ld m, read op T.
  plan.trans_b = p.a_transposed;
  plan.ldb = p.a_transposed ? p.m : p.k;
  plan.ldc = p.n;
  plan.batch = static_cast<int32_t>(p.batch);
  plan.stride_a = p.k * p.n;
  plan.stride_b = p.m * p.k;
  plan.stride_c = p.m * p.n;
  plan.ab_type = ab;
  plan.cd_type = cd;
  plan.compute = p.input_dtype == MIXRT_DTYPE_F32 && p.allow_tf32
                     ? CUBLAS_COMPUTE_32F_FAST_TF32
                     : CUBLAS_COMPUTE_32F;
  plan.scale_type = CUDA_R_32F;
  // cuBLASLt computes act(AB + beta C + bias); ours adds beta out after the
  // activation, so the two only agree without an activation. Its bias must
  // also have the output's type.
  const bool bias_ok = !p.has_bias || p.bias_dtype == p.output_dtype;
  const bool order_ok = p.beta == 0.0f || p.activation == MIXRT_ACTIVATION_NONE;
  if (bias_ok && order_ok &&
      FusedEpilogue(p.has_bias, p.activation, &plan.epilogue,
                    &plan.relu_pass)) {
    plan.beta = p.beta;
  } else {
    plan.separate_epilogue = true;
    plan.relu_pass = false;
    plan.epilogue = CUBLASLT_EPILOGUE_DEFAULT;
    plan.cd_type = CUDA_R_32F;
    plan.beta = 0.0f;
  }
  plan.cache_key =
      absl::StrCat(plan.m, "x", plan.n, "x", plan.k, plan.trans_a ? "T" : "N",
                   plan.trans_b ? "T" : "N", "b", plan.batch, "t", plan.ab_type,
                   ".", plan.cd_type, "c", plan.compute, "e", plan.epilogue,
                   plan.beta != 0.0f ? "+c" : "");
  return plan;
}

uint32_t PointerAlignment(const void* pointer) {
  const auto address = reinterpret_cast<uintptr_t>(pointer);
  uint32_t alignment = 256;
  while (alignment > 1 && address % alignment != 0) alignment /= 2;
  return alignment;
}

std::string OperandAlignment::Key() const {
  return absl::StrCat("/", a, ".", b, ".", c, ".", d);
}

}  // namespace mixrt::cuda
