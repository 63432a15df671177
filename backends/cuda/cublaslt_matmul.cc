#include "backends/cuda/cublaslt_matmul.h"

#include <memory>
#include <utility>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "mixrt/status_macros.h"

namespace mixrt::cuda {
namespace {

absl::Status Check(cublasStatus_t status, const char* call) {
  if (status == CUBLAS_STATUS_SUCCESS) return absl::OkStatus();
  return absl::InternalError(absl::StrCat(call, ": ",
                                          cublasLtGetStatusName(status), ": ",
                                          cublasLtGetStatusString(status)));
}

// Owns the cuBLASLt descriptors of one call.
struct Descriptors {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  ~Descriptors() {
    if (c != nullptr) cublasLtMatrixLayoutDestroy(c);
    if (b != nullptr) cublasLtMatrixLayoutDestroy(b);
    if (a != nullptr) cublasLtMatrixLayoutDestroy(a);
    if (desc != nullptr) cublasLtMatmulDescDestroy(desc);
  }
};

absl::Status MakeLayout(cudaDataType_t type, uint64_t rows, uint64_t cols,
                        int64_t ld, int32_t batch, int64_t stride,
                        cublasLtMatrixLayout_t* layout) {
  if (absl::Status s =
          Check(cublasLtMatrixLayoutCreate(layout, type, rows, cols, ld),
                "cublasLtMatrixLayoutCreate");
      !s.ok() || batch == 1) {
    return s;
  }
  MIXRT_RETURN_IF_ERROR(Check(
      cublasLtMatrixLayoutSetAttribute(
          *layout, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &batch, sizeof(batch)),
      "cublasLtMatrixLayoutSetAttribute"));
  return Check(cublasLtMatrixLayoutSetAttribute(
                   *layout, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET,
                   &stride, sizeof(stride)),
               "cublasLtMatrixLayoutSetAttribute");
}

absl::Status Describe(const CublasLtPlan& plan, const void* bias,
                      Descriptors* d) {
  MIXRT_RETURN_IF_ERROR(
      Check(cublasLtMatmulDescCreate(&d->desc, plan.compute, plan.scale_type),
            "cublasLtMatmulDescCreate"));
  const std::pair<cublasLtMatmulDescAttributes_t, bool> transposes[] = {
      {CUBLASLT_MATMUL_DESC_TRANSA, plan.trans_a},
      {CUBLASLT_MATMUL_DESC_TRANSB, plan.trans_b}};
  for (const auto& [attr, transposed] : transposes) {
    const cublasOperation_t op = transposed ? CUBLAS_OP_T : CUBLAS_OP_N;
    MIXRT_RETURN_IF_ERROR(
        Check(cublasLtMatmulDescSetAttribute(d->desc, attr, &op, sizeof(op)),
              "cublasLtMatmulDescSetAttribute(transpose)"));
  }
  MIXRT_RETURN_IF_ERROR(Check(
      cublasLtMatmulDescSetAttribute(d->desc, CUBLASLT_MATMUL_DESC_EPILOGUE,
                                     &plan.epilogue, sizeof(plan.epilogue)),
      "cublasLtMatmulDescSetAttribute(epilogue)"));
  if (plan.epilogue & CUBLASLT_EPILOGUE_BIAS) {
    MIXRT_RETURN_IF_ERROR(Check(
        cublasLtMatmulDescSetAttribute(
            d->desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof(bias)),
        "cublasLtMatmulDescSetAttribute(bias)"));
  }
  // A layout describes the matrix as stored, before op T.
  MIXRT_RETURN_IF_ERROR(MakeLayout(plan.ab_type, plan.trans_a ? plan.k : plan.m,
                                   plan.trans_a ? plan.m : plan.k, plan.lda,
                                   plan.batch, plan.stride_a, &d->a));
  MIXRT_RETURN_IF_ERROR(MakeLayout(plan.ab_type, plan.trans_b ? plan.n : plan.k,
                                   plan.trans_b ? plan.k : plan.n, plan.ldb,
                                   plan.batch, plan.stride_b, &d->b));
  return MakeLayout(plan.cd_type, plan.m, plan.n, plan.ldc, plan.batch,
                    plan.stride_c, &d->c);
}

}  // namespace

absl::StatusOr<std::unique_ptr<CublasLtMatmul>> CublasLtMatmul::Create() {
  cublasLtHandle_t handle = nullptr;
  MIXRT_RETURN_IF_ERROR(Check(cublasLtCreate(&handle), "cublasLtCreate"));
  void* workspace = nullptr;
  const cudaError_t error = cudaMalloc(&workspace, kWorkspaceBytes);
  if (error != cudaSuccess) {
    cublasLtDestroy(handle);
    return absl::ResourceExhaustedError(absl::StrCat(
        "cuBLASLt workspace: cudaMalloc: ", cudaGetErrorString(error)));
  }
  return std::unique_ptr<CublasLtMatmul>(new CublasLtMatmul(handle, workspace));
}

CublasLtMatmul::~CublasLtMatmul() {
  cudaFree(workspace_);
  cublasLtDestroy(handle_);
}

size_t CublasLtMatmul::cached_algorithms() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return algorithms_.size();
}

absl::StatusOr<cublasLtMatmulAlgo_t> CublasLtMatmul::Algorithm(
    const CublasLtPlan& plan, const OperandAlignment& alignment,
    cublasLtMatmulDesc_t desc, cublasLtMatrixLayout_t a,
    cublasLtMatrixLayout_t b, cublasLtMatrixLayout_t c) {
  const std::string key = plan.cache_key + alignment.Key();
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = algorithms_.find(key);
    if (it != algorithms_.end()) return it->second;
  }
  cublasLtMatmulPreference_t preference = nullptr;
  MIXRT_RETURN_IF_ERROR(Check(cublasLtMatmulPreferenceCreate(&preference),
                              "cublasLtMatmulPreferenceCreate"));
  const uint64_t workspace = kWorkspaceBytes;
  cublasLtMatmulPreferenceSetAttribute(preference,
                                       CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                       &workspace, sizeof(workspace));
  const std::pair<cublasLtMatmulPreferenceAttributes_t, uint32_t> aligns[] = {
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, alignment.a},
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, alignment.b},
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, alignment.c},
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, alignment.d}};
  for (const auto& [attribute, bytes] : aligns) {
    cublasLtMatmulPreferenceSetAttribute(preference, attribute, &bytes,
                                         sizeof(bytes));
  }
  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  const cublasStatus_t status = cublasLtMatmulAlgoGetHeuristic(
      handle_, desc, a, b, c, c, preference, 1, &result, &found);
  cublasLtMatmulPreferenceDestroy(preference);
  MIXRT_RETURN_IF_ERROR(Check(status, "cublasLtMatmulAlgoGetHeuristic"));
  if (found == 0) {
    return absl::UnimplementedError(
        absl::StrCat("cuBLASLt has no algorithm for matmul ", plan.cache_key));
  }
  std::lock_guard<std::mutex> lock(mutex_);
  algorithms_.emplace(key, result.algo);
  return result.algo;
}

absl::Status CublasLtMatmul::Run(const CublasLtPlan& plan, const void* a,
                                 const void* b, const void* c, void* d,
                                 const void* bias, cudaStream_t stream) {
  Descriptors desc;
  MIXRT_RETURN_IF_ERROR(Describe(plan, bias, &desc));
  OperandAlignment alignment;
  alignment.a = PointerAlignment(a);
  alignment.b = PointerAlignment(b);
  alignment.c = PointerAlignment(c);
  alignment.d = PointerAlignment(d);
  MIXRT_ASSIGN_OR_RETURN(
      auto algo, Algorithm(plan, alignment, desc.desc, desc.a, desc.b, desc.c));
  const float alpha = 1.0f;
  return Check(cublasLtMatmul(handle_, desc.desc, &alpha, a, desc.a, b, desc.b,
                              &plan.beta, c, desc.c, d, desc.c, &algo,
                              workspace_, kWorkspaceBytes, stream),
               "cublasLtMatmul");
}

}  // namespace mixrt::cuda
