// The row-major to cuBLASLt mapping of the CUDA plugin's matmul.
#include "backends/cuda/cublaslt_plan.h"

#include "gtest/gtest.h"

namespace mixrt::cuda {
namespace {

MatmulProblem Problem(MixrtDtype in, MixrtDtype out) {
  MatmulProblem p;
  p.m = 512;
  p.n = 4096;
  p.k = 1024;
  p.batch = 3;
  p.input_dtype = in;
  p.output_dtype = out;
  p.bias_dtype = out;
  return p;
}

TEST(CublasLtPlan, SwapsOperandsForRowMajor) {
  auto plan = PlanCublasLtMatmul(Problem(MIXRT_DTYPE_BF16, MIXRT_DTYPE_BF16));
  ASSERT_TRUE(plan.ok()) << plan.status();
  // C^T [n x m] = B^T [n x k] A^T [k x m], all column-major.
  EXPECT_EQ(plan->m, 4096u);
  EXPECT_EQ(plan->n, 512u);
  EXPECT_EQ(plan->k, 1024u);
  EXPECT_EQ(plan->lda, 4096);
  EXPECT_EQ(plan->ldb, 1024);
  EXPECT_EQ(plan->ldc, 4096);
  EXPECT_EQ(plan->batch, 3);
  EXPECT_EQ(plan->stride_a, 1024 * 4096);
  EXPECT_EQ(plan->stride_b, 512 * 1024);
  EXPECT_EQ(plan->stride_c, 512 * 4096);
  EXPECT_EQ(plan->ab_type, CUDA_R_16BF);
  EXPECT_EQ(plan->cd_type, CUDA_R_16BF);
  EXPECT_EQ(plan->compute, CUBLAS_COMPUTE_32F);
  EXPECT_EQ(plan->epilogue, CUBLASLT_EPILOGUE_DEFAULT);
  EXPECT_FALSE(plan->separate_epilogue);
}

TEST(CublasLtPlan, ReadsTransposedOperandsAsOpT) {
  // linear(x, W): in1 = W^T, a view of W [n, k] with strides (1, k); the
  // library's A is our in1, so it is W as stored (column-major k x n, ld k)
  // read op T.
  MatmulProblem p = Problem(MIXRT_DTYPE_BF16, MIXRT_DTYPE_BF16);
  p.b_transposed = true;
  auto plan = PlanCublasLtMatmul(p);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_TRUE(plan->trans_a);
  EXPECT_FALSE(plan->trans_b);
  EXPECT_EQ(plan->lda, 1024);  // k
  EXPECT_EQ(plan->ldb, 1024);  // in0 as before: k
  EXPECT_EQ(plan->stride_a, 1024 * 4096);
  // grad_W = grad^T @ x: in0 = grad^T, a view of grad [k, m] with strides
  // (1, m): the library's B, column-major m x k with ld m, op T.
  p = Problem(MIXRT_DTYPE_BF16, MIXRT_DTYPE_BF16);
  p.a_transposed = true;
  plan = PlanCublasLtMatmul(p);
  EXPECT_FALSE(plan->trans_a);
  EXPECT_TRUE(plan->trans_b);
  EXPECT_EQ(plan->lda, 4096);  // n
  EXPECT_EQ(plan->ldb, 512);   // m
  EXPECT_EQ(plan->stride_b, 512 * 1024);
}

TEST(CublasLtPlan, Tf32OnlyForF32WhenAllowed) {
  MatmulProblem p = Problem(MIXRT_DTYPE_F32, MIXRT_DTYPE_F32);
  EXPECT_EQ(PlanCublasLtMatmul(p)->compute, CUBLAS_COMPUTE_32F);
  p.allow_tf32 = true;
  EXPECT_EQ(PlanCublasLtMatmul(p)->compute, CUBLAS_COMPUTE_32F_FAST_TF32);
  MatmulProblem h = Problem(MIXRT_DTYPE_F16, MIXRT_DTYPE_F32);
  h.allow_tf32 = true;
  auto plan = PlanCublasLtMatmul(h);
  EXPECT_EQ(plan->compute, CUBLAS_COMPUTE_32F);
  EXPECT_EQ(plan->ab_type, CUDA_R_16F);
  EXPECT_EQ(plan->cd_type, CUDA_R_32F);
}

TEST(CublasLtPlan, FusesOnlyEpiloguesCublasLtComputesExactly) {
  struct Row {
    bool bias;
    MixrtActivation act;
    float beta;
    bool separate;
    cublasLtEpilogue_t epilogue;
  };
  const Row rows[] = {
      {true, MIXRT_ACTIVATION_NONE, 0, false, CUBLASLT_EPILOGUE_BIAS},
      // cuBLASLt's ReLU maps NaN to 0: bias fused, ReLU as its own pass.
      {true, MIXRT_ACTIVATION_RELU, 0, false, CUBLASLT_EPILOGUE_BIAS},
      {false, MIXRT_ACTIVATION_RELU, 0, false, CUBLASLT_EPILOGUE_DEFAULT},
      {true, MIXRT_ACTIVATION_GELU_TANH, 0, false, CUBLASLT_EPILOGUE_GELU_BIAS},
      // cuBLASLt's GELU is the tanh form: erf GELU runs separately.
      {true, MIXRT_ACTIVATION_GELU, 0, true, CUBLASLT_EPILOGUE_DEFAULT},
      // beta accumulation is fused when nothing follows the sum...
      {true, MIXRT_ACTIVATION_NONE, 1, false, CUBLASLT_EPILOGUE_BIAS},
      // ...but ours adds beta out after the activation, cuBLASLt before.
      {false, MIXRT_ACTIVATION_RELU, 1, true, CUBLASLT_EPILOGUE_DEFAULT},
  };
  for (const Row& r : rows) {
    MatmulProblem p = Problem(MIXRT_DTYPE_F16, MIXRT_DTYPE_F16);
    p.has_bias = r.bias;
    p.activation = r.act;
    p.beta = r.beta;
    auto plan = PlanCublasLtMatmul(p);
    ASSERT_TRUE(plan.ok());
    EXPECT_EQ(plan->separate_epilogue, r.separate) << r.act << " " << r.beta;
    EXPECT_EQ(plan->epilogue, r.epilogue) << r.act << " " << r.beta;
    EXPECT_EQ(plan->relu_pass, !r.separate && r.act == MIXRT_ACTIVATION_RELU)
        << r.act << " " << r.beta;
    if (r.separate) {
      EXPECT_EQ(plan->cd_type, CUDA_R_32F) << "scratch product is f32";
      EXPECT_EQ(plan->beta, 0.0f);
    } else {
      EXPECT_EQ(plan->beta, r.beta);
    }
  }
  // A bias of another dtype than the output is not fused either.
  MatmulProblem p = Problem(MIXRT_DTYPE_F16, MIXRT_DTYPE_F32);
  p.has_bias = true;
  p.bias_dtype = MIXRT_DTYPE_F16;
  EXPECT_TRUE(PlanCublasLtMatmul(p)->separate_epilogue);
}

TEST(CublasLtPlan, CacheKeysDifferWheneverTheAlgorithmMight) {
  MatmulProblem p = Problem(MIXRT_DTYPE_F16, MIXRT_DTYPE_F16);
  const std::string base = PlanCublasLtMatmul(p)->cache_key;
  MatmulProblem q = p;
  q.k = 1023;
  EXPECT_NE(PlanCublasLtMatmul(q)->cache_key, base);
  q = p;
  q.has_bias = true;
  EXPECT_NE(PlanCublasLtMatmul(q)->cache_key, base);
  q = p;
  q.output_dtype = MIXRT_DTYPE_F32;
  q.bias_dtype = MIXRT_DTYPE_F32;
  EXPECT_NE(PlanCublasLtMatmul(q)->cache_key, base);
  q = p;
  q.beta = 1;
  EXPECT_NE(PlanCublasLtMatmul(q)->cache_key, base);
  q = p;
  q.a_transposed = true;
  const std::string a_t = PlanCublasLtMatmul(q)->cache_key;
  q = p;
  q.b_transposed = true;
  const std::string b_t = PlanCublasLtMatmul(q)->cache_key;
  EXPECT_NE(a_t, base);
  EXPECT_NE(b_t, base);
  EXPECT_NE(a_t, b_t);
  EXPECT_EQ(PlanCublasLtMatmul(p)->cache_key, base);
}

TEST(CublasLtPlan, PointerAlignmentIsTheLargestPowerOfTwoUpTo256) {
  alignas(256) static char buffer[1024];
  EXPECT_EQ(PointerAlignment(buffer), 256u);
  EXPECT_EQ(PointerAlignment(buffer + 512), 256u);
  EXPECT_EQ(PointerAlignment(buffer + 2), 2u);  // e.g. an f16 view at +1
  EXPECT_EQ(PointerAlignment(buffer + 48), 16u);
  EXPECT_EQ(PointerAlignment(buffer + 1), 1u);
  OperandAlignment aligned, view;
  view.b = 2;
  EXPECT_NE(aligned.Key(), view.Key());
}

TEST(CublasLtPlan, RejectsWhatCublasLtCannotTake) {
  EXPECT_FALSE(
      PlanCublasLtMatmul(Problem(MIXRT_DTYPE_I32, MIXRT_DTYPE_I32)).ok());
  EXPECT_FALSE(
      PlanCublasLtMatmul(Problem(MIXRT_DTYPE_F16, MIXRT_DTYPE_BF16)).ok());
  MatmulProblem p = Problem(MIXRT_DTYPE_F32, MIXRT_DTYPE_F32);
  p.batch = int64_t{1} << 32;
  EXPECT_FALSE(PlanCublasLtMatmul(p).ok());
}

}  // namespace
}  // namespace mixrt::cuda
