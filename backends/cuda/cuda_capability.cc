#include "backends/cuda/cuda_capability.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

// BUILD passes the nvcc target lists, so the table cannot drift from them.
#ifndef MIXRT_CUDA_SASS
#define MIXRT_CUDA_SASS ""
#endif
#ifndef MIXRT_CUDA_PTX
#define MIXRT_CUDA_PTX 0
#endif

namespace mixrt::cuda {
namespace {

sdk::Capability MatmulCapability(ComputeCapability cc,
                                 const TensorCoreFeatures& tc,
                                 const MatmulSettings& settings,
                                 MixrtDtype dtype) {
  const std::string sm = absl::StrCat("sm_", cc.sm());
  switch (dtype) {
    case MIXRT_DTYPE_F32:
      if (tc.tf32 && settings.allow_tf32) {
        return {MIXRT_SUPPORT_NATIVE,
                "cuBLASLt, TF32 tensor cores (matmul precision \"high\")", 0.0};
      }
      return {MIXRT_SUPPORT_NATIVE,
              tc.tf32 ? "cuBLASLt, full f32 (TF32 off: matmul precision "
                        "\"highest\")"
                      : "cuBLASLt, f32 CUDA cores",
              0.0};
    case MIXRT_DTYPE_F16:
      if (tc.f16) {
        return {MIXRT_SUPPORT_NATIVE,
                "cuBLASLt on f16 tensor cores, f32 accumulation", 0.0};
      }
      return {MIXRT_SUPPORT_SLOW,
              absl::StrCat(sm,
                           " has no tensor cores (they start at sm_70): "
                           "f16 runs on CUDA cores"),
              0.0};
    case MIXRT_DTYPE_BF16:
      if (tc.bf16) {
        return {MIXRT_SUPPORT_NATIVE,
                "cuBLASLt on bf16 tensor cores, f32 accumulation", 0.0};
      }
      return sdk::Unsupported(absl::StrCat(
          sm,
          " has no bf16 tensor cores and cuBLASLt no bf16 matmul below "
          "sm_80"));
    default:
      return sdk::Unsupported("matmul takes floating tensors only");
  }
}

}  // namespace

sdk::Capability CudaPrecisionSupport(ComputeCapability cc,
                                     MixrtOpClass op_class,
                                     MixrtPrecision precision) {
  const TensorCoreFeatures tc = TensorCoresOf(cc);
  const std::string sm = absl::StrCat("sm_", cc.sm());
  if (precision == MIXRT_PRECISION_TF32) {
    if (op_class != MIXRT_OP_CLASS_MATMUL) {
      return sdk::Unsupported("TF32 is used in matmuls only");
    }
    if (!tc.tf32) {
      return sdk::Unsupported(
          absl::StrCat(sm, " has no TF32 tensor cores (they start at sm_80)"));
    }
    return {MIXRT_SUPPORT_NATIVE,
            "cuBLASLt on TF32 tensor cores, for f32 matmuls under matmul "
            "precision \"high\" (MIXRT_FLOAT32_MATMUL_PRECISION)",
            0.0};
  }
  return sdk::Unsupported(
      tc.fp8 ? absl::StrCat(sm,
                            " has fp8 tensor cores, but this plugin has no fp8 "
                            "kernels yet")
             : absl::StrCat(sm,
                            " has no fp8 tensor cores (they start at "
                            "sm_89)"));
}

TensorCoreFeatures TensorCoresOf(ComputeCapability cc) {
  TensorCoreFeatures f;
  f.f16 = cc.sm() >= 70;
  f.bf16 = cc.sm() >= 80;
  f.tf32 = cc.sm() >= 80;
  f.fp8 = cc.sm() >= 89;
  return f;
}

const CudaBuildTargets& BuiltTargets() {
  static const CudaBuildTargets* targets = [] {
    auto* t = new CudaBuildTargets;
    for (absl::string_view s :
         absl::StrSplit(MIXRT_CUDA_SASS, ',', absl::SkipEmpty())) {
      int sm = 0;
      if (absl::SimpleAtoi(s, &sm)) t->sass.push_back(sm);
    }
    t->ptx = MIXRT_CUDA_PTX;
    return t;
  }();
  return *targets;
}

bool HasKernelImage(ComputeCapability cc, const CudaBuildTargets& targets) {
  for (int sm : targets.sass) {
    if (sm / 10 == cc.major && sm % 10 <= cc.minor) return true;
  }
  return targets.ptx != 0 && cc.sm() >= targets.ptx;
}

std::string DescribeTargets(const CudaBuildTargets& targets) {
  std::string text = absl::StrCat("sm_", absl::StrJoin(targets.sass, ", sm_"));
  if (targets.ptx != 0) absl::StrAppend(&text, " + PTX compute_", targets.ptx);
  return text;
}

sdk::Capability CudaCapability(ComputeCapability cc,
                               const CudaBuildTargets& targets,
                               const MatmulSettings& settings,
                               MixrtOpClass op_class, MixrtDtype dtype) {
  if (!HasKernelImage(cc, targets)) {
    return sdk::Unsupported(
        absl::StrCat("no kernels for sm_", cc.sm(), " in this build (",
                     DescribeTargets(targets),
                     "; CUDA 13 cannot compile for sm_72 or older)"));
  }
  const TensorCoreFeatures tc = TensorCoresOf(cc);
  switch (op_class) {
    case MIXRT_OP_CLASS_MATMUL:
      return MatmulCapability(cc, tc, settings, dtype);
    case MIXRT_OP_CLASS_CONV:
      if (!sdk::IsFloatingDtype(dtype)) {
        return sdk::Unsupported("convolution takes floating tensors only");
      }
      // Direct loops, correct everywhere but far from cuDNN speed.
      return {MIXRT_SUPPORT_SLOW,
              "direct convolution kernels, f32 accumulation (cuDNN not wired)",
              0.0};
    case MIXRT_OP_CLASS_ELEMENTWISE:
    case MIXRT_OP_CLASS_CAST:
      break;
    default:
      if (!sdk::IsFloatingDtype(dtype)) {
        return sdk::Unsupported("this op class takes floating tensors only");
      }
      break;
  }
  // Own kernels load and store 16-bit floats and compute in f32.
  if (dtype == MIXRT_DTYPE_BF16 && !tc.bf16) {
    return {MIXRT_SUPPORT_SLOW,
            absl::StrCat("sm_", cc.sm(),
                         " has no bf16 arithmetic: converted in software"),
            0.0};
  }
  return {MIXRT_SUPPORT_NATIVE, "", 0.0};
}

}  // namespace mixrt::cuda
