// f32 -> bf16 rounding of 8 AVX2 lanes, as sdk::F32ToBF16Bits rounds one
// value (to nearest even). GCC 12 left the scalar loops over
// F32ToBF16Bits unvectorized, so the row kernels use this instead.
#ifndef MIXRT_BACKENDS_CPU_KERNELS_BF16_VECTOR_H_
#define MIXRT_BACKENDS_CPU_KERNELS_BF16_VECTOR_H_

#include <immintrin.h>

#include <cstdint>

namespace mixrt::cpu {

// With kExactNaN a NaN stays a quiet NaN; without, its rounding may turn it
// into anything (for softmax weights, whose row sum carries any NaN into the
// output anyway: the blend cost 20% of a bf16 attention forward).
// Each lane's bf16 bits, in its low 16 bits.
template <bool kExactNaN>
inline __m256i BF16Bits8(__m256 v) {
  const __m256i b = _mm256_castps_si256(v);
  const __m256i lsb =
      _mm256_and_si256(_mm256_srli_epi32(b, 16), _mm256_set1_epi32(1));
  __m256i r = _mm256_srli_epi32(
      _mm256_add_epi32(_mm256_add_epi32(b, _mm256_set1_epi32(0x7fff)), lsb),
      16);
  if constexpr (kExactNaN) {
    const __m256i nan =
        _mm256_or_si256(_mm256_srli_epi32(b, 16), _mm256_set1_epi32(0x40));
    const __m256i is_nan =
        _mm256_cmpgt_epi32(_mm256_and_si256(b, _mm256_set1_epi32(0x7fffffff)),
                           _mm256_set1_epi32(0x7f800000));
    r = _mm256_blendv_epi8(r, nan, is_nan);
  }
  return r;
}

template <bool kExactNaN>
inline void StoreBF16x8(__m256 v, uint16_t* out) {
  const __m256i r = BF16Bits8<kExactNaN>(v);
  const __m256i packed =
      _mm256_permute4x64_epi64(_mm256_packus_epi32(r, r), 0xD8);
  _mm_storeu_si128(reinterpret_cast<__m128i*>(out),
                   _mm256_castsi256_si128(packed));
}

}  // namespace mixrt::cpu

#endif  // MIXRT_BACKENDS_CPU_KERNELS_BF16_VECTOR_H_
