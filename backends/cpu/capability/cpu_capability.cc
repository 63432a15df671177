#include "backends/cpu/capability/cpu_capability.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "backends/cpu/capability/cpu_info.h"
#include "backends/cpu/kernels/cpu_matmul.h"
#include "backends/cpu/kernels/dense_call.h"

namespace mixrt::cpu {
namespace {

sdk::Capability MatmulCapability(MixrtDtype dtype, const MatmulSpeeds& speeds) {
  const CpuInfo& info = GetCpuInfo();
  if (dtype == MIXRT_DTYPE_F32) {
    return {MIXRT_SUPPORT_NATIVE,
            absl::StrCat("oneDNN ", MatmulImplementation(dtype)), 1.0};
  }
  const double ratio =
      dtype == MIXRT_DTYPE_BF16 ? speeds.bf16_vs_f32 : speeds.f16_vs_f32;
  const std::string measured =
      ratio > 0 ? absl::StrFormat("measured %.2fx f32 throughput", ratio)
                : absl::StrCat("speed not measured (", speeds.source, ")");
  const std::string impl = MatmulImplementation(dtype);
  if (dtype == MIXRT_DTYPE_F16 && F16MatmulByBf16Pairs()) {
    const std::string how = absl::StrCat(
        "emulated: oneDNN ", info.onednn_version,
        " has no f16 matmul; each operand is split into two bf16 parts and "
        "three products on oneDNN ",
        OneDnnMatmulImplementation(MIXRT_DTYPE_BF16),
        " are summed in f32 (exact to 2^-18 per product) (", measured, ")");
    // Emulated, so not what AMP picks by itself (it gains little over f32:
    // three products at AMX's ~4x, plus the splits); autocast to f16 uses it.
    return {MIXRT_SUPPORT_SLOW, how, ratio};
  }
  if (dtype == MIXRT_DTYPE_F16 && F16MatmulByBf16PairsPossible()) {
    // AMX, but three bf16 products measured slower than one f32 product.
    return {
        MIXRT_SUPPORT_SLOW,
        absl::StrCat("emulated: oneDNN ", info.onednn_version,
                     " has no f16 matmul; operands are converted to f32, "
                     "which measured faster here than three bf16 products "
                     "on oneDNN ",
                     OneDnnMatmulImplementation(MIXRT_DTYPE_BF16),
                     absl::StrFormat(" (%.2fx f32)", speeds.f16_pairs_vs_f32),
                     " (", measured, ")"),
        ratio};
  }
  if (impl.empty()) {
    return {MIXRT_SUPPORT_SLOW,
            absl::StrCat("emulated: oneDNN ", info.onednn_version, " has no ",
                         DtypeName(dtype), " matmul for ", info.onednn_isa,
                         "; operands are converted to f32 (", measured, ")"),
            ratio};
  }
  if (ratio > 0 && ratio < kSlowerThanF32) {
    return {MIXRT_SUPPORT_SLOW,
            absl::StrCat("native (oneDNN ", impl, ") but ", measured), ratio};
  }
  return {MIXRT_SUPPORT_NATIVE, absl::StrCat("oneDNN ", impl, ", ", measured),
          ratio};
}

}  // namespace

CapabilityTable CapabilityTable::Detect(const MatmulSpeeds& speeds) {
  CapabilityTable t;
  for (int c = 0; c < MIXRT_OP_CLASS_COUNT; ++c) {
    const auto op_class = static_cast<MixrtOpClass>(c);
    for (int d = 0; d < MIXRT_DTYPE_COUNT; ++d) {
      const auto dtype = static_cast<MixrtDtype>(d);
      sdk::Capability& cap = t.table_[c][d];
      const bool floating = dtype == MIXRT_DTYPE_F32 ||
                            dtype == MIXRT_DTYPE_F16 ||
                            dtype == MIXRT_DTYPE_BF16;
      if (!floating) {
        cap = (op_class == MIXRT_OP_CLASS_ELEMENTWISE ||
               op_class == MIXRT_OP_CLASS_CAST)
                  ? sdk::Capability{MIXRT_SUPPORT_NATIVE, "", 0}
                  : sdk::Capability{MIXRT_SUPPORT_UNSUPPORTED,
                                    "this op class takes floating tensors", 0};
      } else if (op_class == MIXRT_OP_CLASS_MATMUL) {
        cap = MatmulCapability(dtype, speeds);
      } else if (op_class == MIXRT_OP_CLASS_CONV) {
        // Convolution follows matmul: oneDNN has both for a dtype or neither.
        cap = OneDnnHasMatmul(dtype)
                  ? sdk::Capability{MIXRT_SUPPORT_NATIVE,
                                    absl::StrCat("oneDNN convolution (",
                                                 GetCpuInfo().onednn_isa, ")"),
                                    0}
                  : sdk::Capability{
                        MIXRT_SUPPORT_SLOW,
                        absl::StrCat(
                            "emulated: oneDNN ", GetCpuInfo().onednn_version,
                            " has no ", DtypeName(dtype), " convolution for ",
                            GetCpuInfo().onednn_isa, "; converted to f32"),
                        0};
      } else if (dtype == MIXRT_DTYPE_F32) {
        cap = {MIXRT_SUPPORT_NATIVE, "", 0};
      } else {
        // Memory-bound ops: storage in 16 bits halves traffic, math in f32
        // registers (F16C / shifts convert), as on GPUs.
        cap = {
            MIXRT_SUPPORT_NATIVE,
            absl::StrCat("stored in ", DtypeName(dtype), ", computed in f32"),
            0};
      }
    }
  }
  return t;
}

}  // namespace mixrt::cpu
