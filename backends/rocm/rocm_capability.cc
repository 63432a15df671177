#include "backends/rocm/rocm_capability.h"

#include <algorithm>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

#ifndef MIXRT_ROCM_ARCHS
#define MIXRT_ROCM_ARCHS ""
#endif

namespace mixrt::rocm {
std::string BaseArchitecture(absl::string_view gcn_arch_name) {
  return std::string(gcn_arch_name.substr(0, gcn_arch_name.find(':')));
}

GfxFamily FamilyOf(absl::string_view arch) {
  if (arch == "gfx908") return GfxFamily::kCdna1;
  if (arch == "gfx90a") return GfxFamily::kCdna2;
  if (arch == "gfx940" || arch == "gfx941" || arch == "gfx942") {
    return GfxFamily::kCdna3;
  }
  if (absl::StartsWith(arch, "gfx11")) return GfxFamily::kRdna3;
  if (absl::StartsWith(arch, "gfx103")) return GfxFamily::kRdna2;
  if (absl::StartsWith(arch, "gfx9") || absl::StartsWith(arch, "gfx8")) {
    return GfxFamily::kGcn;
  }
  return GfxFamily::kUnknown;
}

absl::string_view FamilyName(GfxFamily family) {
  switch (family) {
    case GfxFamily::kGcn:
      return "GCN";
    case GfxFamily::kCdna1:
      return "CDNA1";
    case GfxFamily::kCdna2:
      return "CDNA2";
    case GfxFamily::kCdna3:
      return "CDNA3";
    case GfxFamily::kRdna2:
      return "RDNA2";
    case GfxFamily::kRdna3:
      return "RDNA3";
    default:
      return "unknown";
  }
}

GfxFeatures FeaturesOf(GfxFamily family) {
  GfxFeatures f;
  switch (family) {
    case GfxFamily::kCdna1:
      f.matrix_cores = true;
      break;
    case GfxFamily::kCdna2:
    case GfxFamily::kCdna3:
      f.matrix_cores = true;
      f.bf16_matrix = true;
      break;
    case GfxFamily::kRdna3:
      f.matrix_cores = true;
      f.bf16_matrix = true;
      f.wavefront = 32;
      break;
    case GfxFamily::kRdna2:
      f.wavefront = 32;
      break;
    default:
      break;
  }
  return f;
}

const std::vector<std::string>& BuiltArchitectures() {
  static const auto* archs = new std::vector<std::string>(
      absl::StrSplit(MIXRT_ROCM_ARCHS, ',', absl::SkipEmpty()));
  return *archs;
}

sdk::Capability RocmCapability(absl::string_view gcn_arch_name,
                               const std::vector<std::string>& built,
                               MixrtOpClass op_class, MixrtDtype dtype) {
  const std::string arch = BaseArchitecture(gcn_arch_name);
  if (std::find(built.begin(), built.end(), arch) == built.end()) {
    return sdk::Unsupported(absl::StrCat(
        "no code object for ", arch, " in this build (",
        absl::StrJoin(built, ", "),
        "; Debian's HIP 5.2 device libraries stop at gfx1036 and gfx940)"));
  }
  const GfxFeatures features = FeaturesOf(FamilyOf(arch));
  switch (op_class) {
    case MIXRT_OP_CLASS_CONV:
      if (!sdk::IsFloatingDtype(dtype)) {
        return sdk::Unsupported("convolution takes floating tensors only");
      }
      // Direct loops, correct everywhere but far from MIOpen speed.
      return {MIXRT_SUPPORT_SLOW,
              "direct convolution kernels, f32 accumulation (MIOpen not wired)",
              0.0};
    case MIXRT_OP_CLASS_ELEMENTWISE:
    case MIXRT_OP_CLASS_CAST:
      return {MIXRT_SUPPORT_NATIVE, "", 0.0};
    default:
      break;
  }
  if (!sdk::IsFloatingDtype(dtype)) {
    return sdk::Unsupported("this op class takes floating tensors only");
  }
  if (op_class == MIXRT_OP_CLASS_MATMUL && dtype != MIXRT_DTYPE_F32) {
    // The tiled GEMM widens 16-bit operands to f32 in shared memory: it is
    // correct but no faster than f32, whatever the hardware has.
    return {
        MIXRT_SUPPORT_SLOW,
        absl::StrCat("own FMA tiled GEMM (no rocBLAS/hipBLASLt in Debian 12); ",
                     features.matrix_cores
                         ? absl::StrCat(FamilyName(FamilyOf(arch)),
                                        " matrix cores are not used yet")
                         : absl::StrCat(arch, " has no matrix cores")),
        0.0};
  }
  if (op_class == MIXRT_OP_CLASS_MATMUL) {
    return {MIXRT_SUPPORT_NATIVE,
            "own FMA tiled GEMM (no rocBLAS/hipBLASLt in Debian 12)", 0.0};
  }
  return {MIXRT_SUPPORT_NATIVE, "", 0.0};
}

}  // namespace mixrt::rocm
