#include "backends/cpu/kernels/philox_rows.h"

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "plugins/sdk/philox.h"

namespace mixrt::cpu {
namespace {

constexpr int kBlocks = 8;              // One per 32-bit lane.
constexpr int kElements = 4 * kBlocks;  // Four words per block.

struct Product {
  __m256i hi, lo;
};

// The 64-bit products a * m of the eight 32-bit lanes, split in halves.
inline Product MulHiLo(__m256i a, __m256i m) {
  const __m256i even = _mm256_mul_epu32(a, m);
  const __m256i odd = _mm256_mul_epu32(_mm256_srli_epi64(a, 32), m);
  return {_mm256_blend_epi32(_mm256_srli_epi64(even, 32), odd, 0xAA),
          _mm256_blend_epi32(even, _mm256_slli_epi64(odd, 32), 0xAA)};
}

inline __m256 Units(__m256i words) {
  return _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_srli_epi32(words, 8)),
                       _mm256_set1_ps(1.0f / 16777216.0f));
}

// Blocks counter .. counter + 7 (the low counter word must not wrap): their
// 32 words, in element order, as units.
void EightBlocks(uint64_t counter, uint64_t seed, float* units) {
  const __m256i m0 = _mm256_set1_epi32(static_cast<int>(sdk::kPhiloxMul0));
  const __m256i m1 = _mm256_set1_epi32(static_cast<int>(sdk::kPhiloxMul1));
  __m256i c0 = _mm256_add_epi32(
      _mm256_set1_epi32(static_cast<int>(static_cast<uint32_t>(counter))),
      _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  __m256i c1 =
      _mm256_set1_epi32(static_cast<int>(static_cast<uint32_t>(counter >> 32)));
  __m256i c2 = _mm256_setzero_si256();
  __m256i c3 = _mm256_setzero_si256();
  uint32_t k0 = static_cast<uint32_t>(seed);
  uint32_t k1 = static_cast<uint32_t>(seed >> 32);
  for (int round = 0; round < 10; ++round) {
    const Product p0 = MulHiLo(c0, m0);
    const Product p1 = MulHiLo(c2, m1);
    c0 = _mm256_xor_si256(_mm256_xor_si256(p1.hi, c1),
                          _mm256_set1_epi32(static_cast<int>(k0)));
    c1 = p1.lo;
    c2 = _mm256_xor_si256(_mm256_xor_si256(p0.hi, c3),
                          _mm256_set1_epi32(static_cast<int>(k1)));
    c3 = p0.lo;
    k0 += sdk::kPhiloxWeyl0;
    k1 += sdk::kPhiloxWeyl1;
  }
  // Word w of block b is element 4 b + w: transpose the 4 x 8 words.
  const __m256i u0 = _mm256_unpacklo_epi32(c0, c1);  // b0, b1 | b4, b5
  const __m256i u1 = _mm256_unpackhi_epi32(c0, c1);  // b2, b3 | b6, b7
  const __m256i u2 = _mm256_unpacklo_epi32(c2, c3);
  const __m256i u3 = _mm256_unpackhi_epi32(c2, c3);
  const __m256i r0 = _mm256_unpacklo_epi64(u0, u2);  // block 0 | block 4
  const __m256i r1 = _mm256_unpackhi_epi64(u0, u2);  // block 1 | block 5
  const __m256i r2 = _mm256_unpacklo_epi64(u1, u3);  // block 2 | block 6
  const __m256i r3 = _mm256_unpackhi_epi64(u1, u3);  // block 3 | block 7
  _mm256_storeu_ps(units, Units(_mm256_permute2x128_si256(r0, r1, 0x20)));
  _mm256_storeu_ps(units + 8, Units(_mm256_permute2x128_si256(r2, r3, 0x20)));
  _mm256_storeu_ps(units + 16, Units(_mm256_permute2x128_si256(r0, r1, 0x31)));
  _mm256_storeu_ps(units + 24, Units(_mm256_permute2x128_si256(r2, r3, 0x31)));
}

void ScalarUnits(uint64_t seed, uint64_t offset, uint64_t first, int64_t n,
                 float* units) {
  sdk::ForEachPhiloxUnit(seed, offset, first, n, [&](int64_t i, double unit) {
    units[i] = static_cast<float>(unit);
  });
}

}  // namespace

void PhiloxUnitsRow(uint64_t seed, uint64_t offset, uint64_t first, int64_t n,
                    float* units) {
  // Up to the first element of a block, one block at a time.
  const int64_t head = std::min<int64_t>(n, (4 - first % 4) % 4);
  ScalarUnits(seed, offset, first, head, units);
  int64_t i = head;
  for (; i + kElements <= n; i += kElements) {
    const uint64_t counter = (first + i) / 4 + offset;
    if (static_cast<uint32_t>(counter) > UINT32_MAX - (kBlocks - 1)) {
      ScalarUnits(seed, offset, first + i, kElements, units + i);  // Wraps.
    } else {
      EightBlocks(counter, seed, units + i);
    }
  }
  ScalarUnits(seed, offset, first + i, n - i, units + i);
}

void DropoutFactorsRow(uint64_t seed, uint64_t offset, uint64_t first,
                       int64_t n, double p, float* factors) {
  const auto kept = static_cast<float>(1.0 / (1.0 - p));
  if (p == 0) {
    std::fill(factors, factors + n, kept);
    return;
  }
  PhiloxUnitsRow(seed, offset, first, n, factors);
  // Units are floats: unit < p exactly when unit < the least float >= p.
  float least = static_cast<float>(p);
  if (least < p) least = std::nextafter(least, INFINITY);
  KeepFactorsRow(factors, n, least, kept);
}

void KeepFactorsRow(float* units, int64_t n, float least_kept, float kept) {
  const __m256 least = _mm256_set1_ps(least_kept),
               factor = _mm256_set1_ps(kept);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 keep =
        _mm256_cmp_ps(_mm256_loadu_ps(units + i), least, _CMP_GE_OQ);
    _mm256_storeu_ps(units + i, _mm256_and_ps(keep, factor));
  }
  for (; i < n; ++i) units[i] = units[i] >= least_kept ? kept : 0.0f;
}

}  // namespace mixrt::cpu
