#include "backends/cpu/kernels/bf16_pair.h"

// GCC 12's AVX-512 headers trip its own -Wuninitialized (see
// softmax_rows.cc).
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <cmath>

#include "backends/cpu/capability/cpu_info.h"
#include "mixrt/float_convert.h"

namespace mixrt::cpu {
namespace {

bool SplitScalar(const float* x, int64_t n, uint16_t* hi, uint16_t* lo) {
  bool finite = true;
  for (int64_t i = 0; i < n; ++i) {
    hi[i] = sdk::F32ToBF16Bits(x[i]);
    const bool f = std::isfinite(x[i]);
    lo[i] = f ? sdk::F32ToBF16Bits(x[i] - sdk::BF16BitsToF32(hi[i])) : 0;
    finite &= f;
  }
  return finite;
}

// vcvtneps2bf16 rounds as F32ToBF16Bits does (nearest even) for every
// value this sees: hi of an f16 value is never subnormal in bf16 (f16's
// smallest, 2^-24, is far above bf16's 2^-126), nor is a nonzero lo.
MIXRT_AVX512_BF16 bool SplitAvx512Bf16(const float* x, int64_t n, uint16_t* hi,
                                       uint16_t* lo) {
  int64_t i = 0;
  __mmask16 all_finite = 0xffff;
  const __m512 inf = _mm512_set1_ps(INFINITY);
  for (; i + 16 <= n; i += 16) {
    const __m512 v = _mm512_loadu_ps(x + i);
    const __m256i h = reinterpret_cast<__m256i>(_mm512_cvtneps_pbh(v));
    const __m512 hf =
        _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
    // Finite lanes: |v| < inf (false for NaN too).
    const __mmask16 finite =
        _mm512_cmp_ps_mask(_mm512_abs_ps(v), inf, _CMP_LT_OQ);
    const __m512 r = _mm512_maskz_sub_ps(finite, v, hf);
    all_finite &= finite;
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(hi + i), h);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(lo + i),
                        reinterpret_cast<__m256i>(_mm512_cvtneps_pbh(r)));
  }
  return SplitScalar(x + i, n - i, hi + i, lo + i) && all_finite == 0xffff;
}

}  // namespace

bool SplitIntoBf16Pairs(const float* x, int64_t n, uint16_t* hi, uint16_t* lo) {
  static const bool vector = OwnAvx512Bf16Usable();
  return vector ? SplitAvx512Bf16(x, n, hi, lo) : SplitScalar(x, n, hi, lo);
}

}  // namespace mixrt::cpu
