// The CUDA and ROCm capability tables, from synthetic device properties.
#include <string>

#include "backends/cuda/cuda_capability.h"
#include "backends/rocm/rocm_capability.h"
#include "gtest/gtest.h"

namespace mixrt {
namespace {

using cuda::ComputeCapability;
using cuda::CudaBuildTargets;
using cuda::CudaCapability;
using cuda::MatmulSettings;

TEST(CudaCapability, TensorCoreGenerations) {
  struct Row {
    int major, minor;
    bool f16, bf16, tf32, fp8;
  };
  const Row rows[] = {
      {6, 0, false, false, false, false}, {7, 0, true, false, false, false},
      {7, 5, true, false, false, false},  {8, 0, true, true, true, false},
      {8, 6, true, true, true, false},    {8, 9, true, true, true, true},
      {9, 0, true, true, true, true}};
  for (const Row& r : rows) {
    const auto f = cuda::TensorCoresOf({r.major, r.minor});
    EXPECT_EQ(f.f16, r.f16) << r.major << r.minor;
    EXPECT_EQ(f.bf16, r.bf16) << r.major << r.minor;
    EXPECT_EQ(f.tf32, r.tf32) << r.major << r.minor;
    EXPECT_EQ(f.fp8, r.fp8) << r.major << r.minor;
  }
}

TEST(CudaCapability, KernelImagesFollowSassAndPtxCompatibility) {
  const CudaBuildTargets& built = cuda::BuiltTargets();
  EXPECT_EQ(cuda::DescribeTargets(built),
            "sm_75, sm_80, sm_90 + PTX compute_90");
  EXPECT_FALSE(cuda::HasKernelImage({6, 0}, built));
  EXPECT_FALSE(cuda::HasKernelImage({7, 0}, built));
  EXPECT_TRUE(cuda::HasKernelImage({7, 5}, built));
  EXPECT_TRUE(cuda::HasKernelImage({8, 6}, built));  // sm_80 SASS
  EXPECT_TRUE(cuda::HasKernelImage({8, 9}, built));
  EXPECT_TRUE(cuda::HasKernelImage({9, 0}, built));
  EXPECT_TRUE(cuda::HasKernelImage({12, 0}, built));  // PTX JIT
  EXPECT_FALSE(cuda::HasKernelImage({8, 0}, {{90}, 0}));
}

TEST(CudaCapability, MatmulPrecisionsPerArchitecture) {
  // A build with code for every generation, to see the hardware mapping.
  const CudaBuildTargets all = {{60, 70, 75, 80, 89, 90}, 90};
  const MatmulSettings highest;
  auto level = [&](int major, int minor, MixrtDtype dtype) {
    return CudaCapability({major, minor}, all, highest, MIXRT_OP_CLASS_MATMUL,
                          dtype)
        .level;
  };
  // Pascal: no tensor cores (f16 slow), no bf16: autocast narrows to f32.
  EXPECT_EQ(level(6, 0, MIXRT_DTYPE_F32), MIXRT_SUPPORT_NATIVE);
  EXPECT_EQ(level(6, 0, MIXRT_DTYPE_F16), MIXRT_SUPPORT_SLOW);
  EXPECT_EQ(level(6, 0, MIXRT_DTYPE_BF16), MIXRT_SUPPORT_UNSUPPORTED);
  for (auto [major, minor] : {std::pair{7, 0}, std::pair{7, 5}}) {
    EXPECT_EQ(level(major, minor, MIXRT_DTYPE_F16), MIXRT_SUPPORT_NATIVE);
    EXPECT_EQ(level(major, minor, MIXRT_DTYPE_BF16), MIXRT_SUPPORT_UNSUPPORTED);
  }
  for (auto [major, minor] :
       {std::pair{8, 0}, std::pair{8, 6}, std::pair{8, 9}, std::pair{9, 0}}) {
    EXPECT_EQ(level(major, minor, MIXRT_DTYPE_F16), MIXRT_SUPPORT_NATIVE);
    EXPECT_EQ(level(major, minor, MIXRT_DTYPE_BF16), MIXRT_SUPPORT_NATIVE);
  }
  EXPECT_EQ(level(8, 0, MIXRT_DTYPE_I64), MIXRT_SUPPORT_UNSUPPORTED);
  const std::string bf16_reason =
      CudaCapability({7, 5}, all, highest, MIXRT_OP_CLASS_MATMUL,
                     MIXRT_DTYPE_BF16)
          .reason;
  EXPECT_NE(bf16_reason.find("sm_75"), std::string::npos) << bf16_reason;
  // TF32 is named only when allowed and available.
  MatmulSettings high;
  high.allow_tf32 = true;
  EXPECT_NE(
      CudaCapability({8, 0}, all, high, MIXRT_OP_CLASS_MATMUL, MIXRT_DTYPE_F32)
          .reason.find("TF32 tensor cores"),
      std::string::npos);
  EXPECT_EQ(
      CudaCapability({7, 5}, all, high, MIXRT_OP_CLASS_MATMUL, MIXRT_DTYPE_F32)
          .reason.find("TF32 tensor cores"),
      std::string::npos);
}

TEST(CudaCapability, PrecisionsBeyondTheStorageDtypes) {
  auto level = [](int major, int minor, MixrtOpClass c, MixrtPrecision p) {
    return cuda::CudaPrecisionSupport({major, minor}, c, p).level;
  };
  EXPECT_EQ(level(7, 5, MIXRT_OP_CLASS_MATMUL, MIXRT_PRECISION_TF32),
            MIXRT_SUPPORT_UNSUPPORTED);
  EXPECT_EQ(level(8, 0, MIXRT_OP_CLASS_MATMUL, MIXRT_PRECISION_TF32),
            MIXRT_SUPPORT_NATIVE);
  EXPECT_EQ(level(9, 0, MIXRT_OP_CLASS_CONV, MIXRT_PRECISION_TF32),
            MIXRT_SUPPORT_UNSUPPORTED);
  // fp8: on the hardware from sm_89, in no kernel of this plugin yet.
  const sdk::Capability fp8 = cuda::CudaPrecisionSupport(
      {9, 0}, MIXRT_OP_CLASS_MATMUL, MIXRT_PRECISION_FP8_E4M3);
  EXPECT_EQ(fp8.level, MIXRT_SUPPORT_UNSUPPORTED);
  EXPECT_EQ(fp8.reason,
            "sm_90 has fp8 tensor cores, but this plugin has no fp8 kernels "
            "yet");
  EXPECT_EQ(cuda::CudaPrecisionSupport({8, 6}, MIXRT_OP_CLASS_MATMUL,
                                       MIXRT_PRECISION_FP8_E5M2)
                .reason,
            "sm_86 has no fp8 tensor cores (they start at sm_89)");
}

TEST(CudaCapability, RealBuildRefusesVoltaWithTheReason) {
  const auto cap =
      CudaCapability({7, 0}, cuda::BuiltTargets(), MatmulSettings(),
                     MIXRT_OP_CLASS_ELEMENTWISE, MIXRT_DTYPE_F32);
  EXPECT_EQ(cap.level, MIXRT_SUPPORT_UNSUPPORTED);
  EXPECT_NE(cap.reason.find("no kernels for sm_70"), std::string::npos)
      << cap.reason;
}

TEST(CudaCapability, OwnKernelsPerOpClass) {
  // Direct convolution is correct but no match for cuDNN: said as "slow".
  const auto conv =
      CudaCapability({9, 0}, cuda::BuiltTargets(), MatmulSettings(),
                     MIXRT_OP_CLASS_CONV, MIXRT_DTYPE_BF16);
  EXPECT_EQ(conv.level, MIXRT_SUPPORT_SLOW);
  EXPECT_NE(conv.reason.find("cuDNN not wired"), std::string::npos);
  EXPECT_EQ(CudaCapability({9, 0}, cuda::BuiltTargets(), MatmulSettings(),
                           MIXRT_OP_CLASS_CONV, MIXRT_DTYPE_I32)
                .level,
            MIXRT_SUPPORT_UNSUPPORTED);
  EXPECT_EQ(CudaCapability({9, 0}, cuda::BuiltTargets(), MatmulSettings(),
                           MIXRT_OP_CLASS_POOL, MIXRT_DTYPE_F16)
                .level,
            MIXRT_SUPPORT_NATIVE);
  EXPECT_EQ(CudaCapability({9, 0}, cuda::BuiltTargets(), MatmulSettings(),
                           MIXRT_OP_CLASS_EMBEDDING, MIXRT_DTYPE_BF16)
                .level,
            MIXRT_SUPPORT_NATIVE);
  EXPECT_EQ(CudaCapability({9, 0}, cuda::BuiltTargets(), MatmulSettings(),
                           MIXRT_OP_CLASS_ELEMENTWISE, MIXRT_DTYPE_I64)
                .level,
            MIXRT_SUPPORT_NATIVE);
  EXPECT_EQ(CudaCapability({9, 0}, cuda::BuiltTargets(), MatmulSettings(),
                           MIXRT_OP_CLASS_SOFTMAX, MIXRT_DTYPE_I64)
                .level,
            MIXRT_SUPPORT_UNSUPPORTED);
  EXPECT_EQ(CudaCapability({7, 5}, cuda::BuiltTargets(), MatmulSettings(),
                           MIXRT_OP_CLASS_SOFTMAX, MIXRT_DTYPE_BF16)
                .level,
            MIXRT_SUPPORT_SLOW);
}

TEST(RocmCapability, ArchitectureFamiliesAndFeatures) {
  EXPECT_EQ(rocm::BaseArchitecture("gfx90a:sramecc+:xnack-"), "gfx90a");
  EXPECT_EQ(rocm::FamilyOf("gfx908"), rocm::GfxFamily::kCdna1);
  EXPECT_EQ(rocm::FamilyOf("gfx90a"), rocm::GfxFamily::kCdna2);
  EXPECT_EQ(rocm::FamilyOf("gfx942"), rocm::GfxFamily::kCdna3);
  EXPECT_EQ(rocm::FamilyOf("gfx1030"), rocm::GfxFamily::kRdna2);
  EXPECT_EQ(rocm::FamilyOf("gfx1100"), rocm::GfxFamily::kRdna3);
  EXPECT_EQ(rocm::FamilyOf("gfx906"), rocm::GfxFamily::kGcn);
  const auto cdna1 = rocm::FeaturesOf(rocm::GfxFamily::kCdna1);
  EXPECT_TRUE(cdna1.matrix_cores);
  EXPECT_FALSE(cdna1.bf16_matrix);
  const auto cdna2 = rocm::FeaturesOf(rocm::GfxFamily::kCdna2);
  EXPECT_TRUE(cdna2.matrix_cores);
  EXPECT_TRUE(cdna2.bf16_matrix);
  EXPECT_EQ(cdna2.wavefront, 64);
  EXPECT_EQ(rocm::FeaturesOf(rocm::GfxFamily::kRdna2).wavefront, 32);
  EXPECT_FALSE(rocm::FeaturesOf(rocm::GfxFamily::kGcn).matrix_cores);
}

TEST(RocmCapability, TableForBuiltAndMissingArchitectures) {
  const auto& built = rocm::BuiltArchitectures();
  ASSERT_EQ(built, (std::vector<std::string>{"gfx90a", "gfx940"}));
  const auto missing = rocm::RocmCapability(
      "gfx1100", built, MIXRT_OP_CLASS_ELEMENTWISE, MIXRT_DTYPE_F32);
  EXPECT_EQ(missing.level, MIXRT_SUPPORT_UNSUPPORTED);
  EXPECT_NE(missing.reason.find("no code object for gfx1100"),
            std::string::npos);
  const auto f32 = rocm::RocmCapability("gfx90a:sramecc+:xnack-", built,
                                        MIXRT_OP_CLASS_MATMUL, MIXRT_DTYPE_F32);
  EXPECT_EQ(f32.level, MIXRT_SUPPORT_NATIVE);
  // Matrix cores exist but the FMA GEMM does not use them: honest "slow".
  const auto bf16 = rocm::RocmCapability("gfx90a", built, MIXRT_OP_CLASS_MATMUL,
                                         MIXRT_DTYPE_BF16);
  EXPECT_EQ(bf16.level, MIXRT_SUPPORT_SLOW);
  EXPECT_NE(bf16.reason.find("CDNA2 matrix cores are not used"),
            std::string::npos)
      << bf16.reason;
  EXPECT_EQ(rocm::RocmCapability("gfx940", built, MIXRT_OP_CLASS_CONV,
                                 MIXRT_DTYPE_F32)
                .level,
            MIXRT_SUPPORT_SLOW);
  EXPECT_EQ(rocm::RocmCapability("gfx940", built, MIXRT_OP_CLASS_POOL,
                                 MIXRT_DTYPE_BF16)
                .level,
            MIXRT_SUPPORT_NATIVE);
}

}  // namespace
}  // namespace mixrt
