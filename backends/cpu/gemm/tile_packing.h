// What the small products' tiles (small_gemm, small_gemm_bf16) share:
// transposing 32-bit values (f32, or pairs of bf16) into the row-major
// panel a tile reads, and the lane mask of a ragged vector.
#ifndef MIXRT_BACKENDS_CPU_GEMM_TILE_PACKING_H_
#define MIXRT_BACKENDS_CPU_GEMM_TILE_PACKING_H_

#include <immintrin.h>

#include <cstdint>

namespace mixrt::cpu {

// The 8 x 8 block of 32-bit values at b (row stride b_cols) transposed
// into out (row stride ldo) with AVX's shuffle network: how the small
// products pack a Linear's weight read as its transpose (x W^T), whose
// scalar packing cost more than oneDNN's whole overhead.
inline void Transpose8x8(const float* b, int64_t b_cols, float* out,
                         int64_t ldo) {
  __m256 r0 = _mm256_loadu_ps(b + 0 * b_cols),
         r1 = _mm256_loadu_ps(b + 1 * b_cols);
  __m256 r2 = _mm256_loadu_ps(b + 2 * b_cols),
         r3 = _mm256_loadu_ps(b + 3 * b_cols);
  __m256 r4 = _mm256_loadu_ps(b + 4 * b_cols),
         r5 = _mm256_loadu_ps(b + 5 * b_cols);
  __m256 r6 = _mm256_loadu_ps(b + 6 * b_cols),
         r7 = _mm256_loadu_ps(b + 7 * b_cols);
  const __m256 t0 = _mm256_unpacklo_ps(r0, r1), t1 = _mm256_unpackhi_ps(r0, r1);
  const __m256 t2 = _mm256_unpacklo_ps(r2, r3), t3 = _mm256_unpackhi_ps(r2, r3);
  const __m256 t4 = _mm256_unpacklo_ps(r4, r5), t5 = _mm256_unpackhi_ps(r4, r5);
  const __m256 t6 = _mm256_unpacklo_ps(r6, r7), t7 = _mm256_unpackhi_ps(r6, r7);
  const __m256 u0 = _mm256_shuffle_ps(t0, t2, _MM_SHUFFLE(1, 0, 1, 0));
  const __m256 u1 = _mm256_shuffle_ps(t0, t2, _MM_SHUFFLE(3, 2, 3, 2));
  const __m256 u2 = _mm256_shuffle_ps(t1, t3, _MM_SHUFFLE(1, 0, 1, 0));
  const __m256 u3 = _mm256_shuffle_ps(t1, t3, _MM_SHUFFLE(3, 2, 3, 2));
  const __m256 u4 = _mm256_shuffle_ps(t4, t6, _MM_SHUFFLE(1, 0, 1, 0));
  const __m256 u5 = _mm256_shuffle_ps(t4, t6, _MM_SHUFFLE(3, 2, 3, 2));
  const __m256 u6 = _mm256_shuffle_ps(t5, t7, _MM_SHUFFLE(1, 0, 1, 0));
  const __m256 u7 = _mm256_shuffle_ps(t5, t7, _MM_SHUFFLE(3, 2, 3, 2));
  _mm256_storeu_ps(out + 0 * ldo, _mm256_permute2f128_ps(u0, u4, 0x20));
  _mm256_storeu_ps(out + 1 * ldo, _mm256_permute2f128_ps(u1, u5, 0x20));
  _mm256_storeu_ps(out + 2 * ldo, _mm256_permute2f128_ps(u2, u6, 0x20));
  _mm256_storeu_ps(out + 3 * ldo, _mm256_permute2f128_ps(u3, u7, 0x20));
  _mm256_storeu_ps(out + 4 * ldo, _mm256_permute2f128_ps(u0, u4, 0x31));
  _mm256_storeu_ps(out + 5 * ldo, _mm256_permute2f128_ps(u1, u5, 0x31));
  _mm256_storeu_ps(out + 6 * ldo, _mm256_permute2f128_ps(u2, u6, 0x31));
  _mm256_storeu_ps(out + 7 * ldo, _mm256_permute2f128_ps(u3, u7, 0x31));
}

// out[c * ldo + r] = in[r * ldi + c] for r < rows, c < cols: 8 x 8 blocks
// through Transpose8x8, the ragged edges value by value.
inline void TransposePanel(const float* in, int64_t ldi, int64_t rows,
                           int64_t cols, float* out, int64_t ldo) {
  int64_t r0 = 0;
  for (; r0 + 8 <= rows; r0 += 8) {
    int64_t c0 = 0;
    for (; c0 + 8 <= cols; c0 += 8) {
      Transpose8x8(in + r0 * ldi + c0, ldi, out + c0 * ldo + r0, ldo);
    }
    for (; c0 < cols; ++c0) {
      for (int64_t r = r0; r < r0 + 8; ++r)
        out[c0 * ldo + r] = in[r * ldi + c0];
    }
  }
  for (; r0 < rows; ++r0) {
    for (int64_t c = 0; c < cols; ++c) out[c * ldo + r0] = in[r0 * ldi + c];
  }
}

// The first `count` of 16 lanes (none for count <= 0, all from 16).
inline __mmask16 Lanes(int64_t count) {
  return count >= 16  ? 0xffff
         : count <= 0 ? 0
                      : static_cast<__mmask16>((1u << count) - 1);
}

}  // namespace mixrt::cpu

#endif  // MIXRT_BACKENDS_CPU_GEMM_TILE_PACKING_H_
