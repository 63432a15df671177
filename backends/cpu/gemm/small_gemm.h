// f32 products small enough that oneDNN's fixed cost per call dominates
// them, in the plugin's own tiles: AVX-512 where the CPU has it (and
// ONEDNN_MAX_CPU_ISA does not cap it), else AVX2. A 32 x 64 x 64 product
// with bias took 3.8 us through oneDNN 2.6.3 (primitive lookup, argument
// map, the brgemm driver), of which the multiply-adds at this CPU's FMA
// peak are 2.4 us; a small MLP's train step is nine such products. On an
// AVX2 machine (Zen 3) the AVX2 tiles took a compiled small-MLP step from
// 67.4 to 52 us and the eager one from 127 to 106.
#ifndef MIXRT_BACKENDS_CPU_GEMM_SMALL_GEMM_H_
#define MIXRT_BACKENDS_CPU_GEMM_SMALL_GEMM_H_

#include <cstdint>

namespace mixrt::cpu {

// c = relu?(a x b (+ bias)) (+ beta c), all f32. Element (i, p) of a is
// a[i * a_rows + p * a_cols]; (p, j) of b is b[p * b_rows + j * b_cols]; c
// is row-major with row stride ldc; bias (when not null) is [n] with stride
// bias_stride (0 broadcasts one value).
struct SmallGemm {
  int64_t m = 0, n = 0, k = 0;
  const float* a = nullptr;
  int64_t a_rows = 0, a_cols = 0;
  const float* b = nullptr;
  int64_t b_rows = 0, b_cols = 0;
  float* c = nullptr;
  int64_t ldc = 0;
  const float* bias = nullptr;
  int64_t bias_stride = 0;
  float beta = 0;
  // The matmul's relu epilogue, as the SDK's relu: NaN stays NaN (an
  // overflow must reach the grad scaler), anything not above 0 becomes +0.
  bool relu = false;
};

// Multiply-adds up to which a product runs here: below it oneDNN's fixed
// cost is more than a tenth of the product.
constexpr int64_t kSmallGemmWork = int64_t{1} << 18;

// Whether m x n x k is at most kSmallGemmWork (and not empty): the tiles
// run on every CPU the plugin loads on (its build baseline is AVX2 + FMA).
bool SmallGemmApplies(int64_t m, int64_t n, int64_t k);

// Runs the product on this thread. Only where SmallGemmApplies.
void RunSmallGemm(const SmallGemm& g);

}  // namespace mixrt::cpu

#endif  // MIXRT_BACKENDS_CPU_GEMM_SMALL_GEMM_H_
