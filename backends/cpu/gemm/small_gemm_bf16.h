// bf16 products small enough that oneDNN's fixed cost per call dominates
// them, on avx512_bf16's vdpbf16ps (two bf16 multiply-adds per f32 lane,
// twice the f32 FMA rate) in the plugin's own tiles. The small MLP's bf16
// train step spent 13 us of its 43 in oneDNN's nine products, whose
// multiply-adds at the vdpbf16ps peak take 6.
#ifndef MIXRT_BACKENDS_CPU_GEMM_SMALL_GEMM_BF16_H_
#define MIXRT_BACKENDS_CPU_GEMM_SMALL_GEMM_BF16_H_

#include <cstdint>

#include "mixrt/plugin_api.h"

namespace mixrt::cpu {

// c = relu?(a x b (+ bias)) (+ beta c): a and b bf16, accumulated in f32
// (pairs of products summed as vdpbf16ps sums them, as oneDNN's bf16
// products on these CPUs do), c f32 or bf16 (rounded to nearest even, a
// subnormal result to zero, as vcvtneps2bf16 does). Element (i, p) of a is
// a[i * a_rows + p * a_cols]; (p, j) of b is b[p * b_rows + j * b_cols]; c
// is row-major with row stride ldc; bias (when not null) is [n] of
// bias_dtype with stride bias_stride (0 broadcasts one value).
struct SmallGemmBf16 {
  int64_t m = 0, n = 0, k = 0;
  const uint16_t* a = nullptr;
  int64_t a_rows = 0, a_cols = 0;
  const uint16_t* b = nullptr;
  int64_t b_rows = 0, b_cols = 0;
  void* c = nullptr;
  MixrtDtype c_dtype = MIXRT_DTYPE_F32;
  int64_t ldc = 0;
  const void* bias = nullptr;
  MixrtDtype bias_dtype = MIXRT_DTYPE_F32;
  int64_t bias_stride = 0;
  float beta = 0;
  bool relu = false;  // NaN stays NaN, anything not above 0 becomes +0.
};

// Whether this CPU runs the tiles (avx512_bf16, not capped below it by
// ONEDNN_MAX_CPU_ISA) and m x n x k is at most kSmallGemmWork.
bool SmallGemmBf16Applies(int64_t m, int64_t n, int64_t k);

// Runs the product on this thread. Only where SmallGemmBf16Applies.
void RunSmallGemmBf16(const SmallGemmBf16& g);

}  // namespace mixrt::cpu

#endif  // MIXRT_BACKENDS_CPU_GEMM_SMALL_GEMM_BF16_H_
