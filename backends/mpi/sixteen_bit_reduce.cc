#include "backends/mpi/sixteen_bit_reduce.h"

#include <cpuid.h>
#include <immintrin.h>

#include "mixrt/float_convert.h"

namespace mixrt::mpi {
namespace {

using sdk::F16BitsToF32;
using sdk::F32Bits;
using sdk::F32FromBits;
using sdk::F32ToF16Bits;

enum class Combine { kSum, kMax, kDivide };

// bf16 <-> f32 without branches, so that the compiler vectorizes the loops
// below (the same results as sdk::F32ToBF16Bits / BF16BitsToF32).
inline float FromBF16(uint16_t b) {
  return F32FromBits(static_cast<uint32_t>(b) << 16);
}
inline uint16_t ToBF16(float f) {
  const uint32_t x = F32Bits(f);
  const uint32_t rounded = (x + 0x7fffu + ((x >> 16) & 1u)) >> 16;
  const uint32_t quiet_nan = (x >> 16) | 0x40u;
  return static_cast<uint16_t>((x & 0x7fffffffu) > 0x7f800000u ? quiet_nan
                                                               : rounded);
}

template <Combine kOp>
inline float Apply(float x, float y, float divisor) {
  if (kOp == Combine::kSum) return x + y;
  // | not ||: no branch, so that the loop vectorizes.
  if (kOp == Combine::kMax) return ((x != x) | (x > y)) ? x : y;
  return y / divisor;
}

// One loop body, compiled twice: for AVX2 (8 lanes; every CPU these
// machines have) and for the baseline, chosen at run time. Not GCC's
// target_clones: clang (the fuzz build) refuses it on templates.
template <Combine kOp>
__attribute__((always_inline)) inline void LoopBF16(const uint16_t* in,
                                                    uint16_t* inout, size_t n,
                                                    float divisor) {
  for (size_t i = 0; i < n; ++i) {
    const float x = kOp == Combine::kDivide ? 0.0f : FromBF16(in[i]);
    inout[i] = ToBF16(Apply<kOp>(x, FromBF16(inout[i]), divisor));
  }
}

template <Combine kOp>
__attribute__((target("avx2"))) void LoopBF16Avx2(const uint16_t* in,
                                                  uint16_t* inout, size_t n,
                                                  float divisor) {
  LoopBF16<kOp>(in, inout, n, divisor);
}

template <Combine kOp>
void LoopBF16Baseline(const uint16_t* in, uint16_t* inout, size_t n,
                      float divisor) {
  LoopBF16<kOp>(in, inout, n, divisor);
}

template <Combine kOp>
void ScalarF16(const uint16_t* in, uint16_t* inout, size_t n, float divisor) {
  for (size_t i = 0; i < n; ++i) {
    const float x = kOp == Combine::kDivide ? 0.0f : F16BitsToF32(in[i]);
    inout[i] = F32ToF16Bits(Apply<kOp>(x, F16BitsToF32(inout[i]), divisor));
  }
}

// f16 has the F16C converters on every CPU these machines have (AVX2 and
// up): vcvtps2ph rounds to nearest even, keeps subnormals (it ignores
// MXCSR's DAZ) and quiets NaN, as sdk::F32ToF16Bits does.
template <Combine kOp>
__attribute__((target("avx2,f16c"))) void VectorF16(const uint16_t* in,
                                                    uint16_t* inout, size_t n,
                                                    float divisor) {
  const __m256 d = _mm256_set1_ps(divisor);
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m128i* out = reinterpret_cast<__m128i*>(inout + i);
    const __m256 y = _mm256_cvtph_ps(_mm_loadu_si128(out));
    __m256 r;
    if (kOp == Combine::kDivide) {
      r = _mm256_div_ps(y, d);
    } else {
      const __m256 x = _mm256_cvtph_ps(
          _mm_loadu_si128(reinterpret_cast<const __m128i*>(in + i)));
      if (kOp == Combine::kSum) {
        r = _mm256_add_ps(x, y);
      } else {
        const __m256 take_x = _mm256_or_ps(_mm256_cmp_ps(x, x, _CMP_UNORD_Q),
                                           _mm256_cmp_ps(x, y, _CMP_GT_OQ));
        r = _mm256_blendv_ps(y, x, take_x);
      }
    }
    _mm_storeu_si128(out, _mm256_cvtps_ph(r, _MM_FROUND_TO_NEAREST_INT));
  }
  ScalarF16<kOp>(kOp == Combine::kDivide ? nullptr : in + i, inout + i, n - i,
                 divisor);
}

bool HasAvx2() {
  static const bool avx2 = __builtin_cpu_supports("avx2");
  return avx2;
}

// F16C is CPUID leaf 1, ECX bit 29 (clang's __builtin_cpu_supports does not
// know the name).
bool HasAvx2AndF16c() {
  static const bool f16c = [] {
    unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
    return HasAvx2() && __get_cpuid(1, &eax, &ebx, &ecx, &edx) != 0 &&
           (ecx & (1u << 29)) != 0;
  }();
  return f16c;
}

template <Combine kOp>
void Run(Float16Kind kind, const uint16_t* in, uint16_t* inout, size_t n,
         float divisor) {
  if (kind == Float16Kind::kBF16) {
    if (HasAvx2()) return LoopBF16Avx2<kOp>(in, inout, n, divisor);
    return LoopBF16Baseline<kOp>(in, inout, n, divisor);
  }
  if (HasAvx2AndF16c()) return VectorF16<kOp>(in, inout, n, divisor);
  ScalarF16<kOp>(in, inout, n, divisor);
}

}  // namespace

void SumInto16(Float16Kind kind, const uint16_t* in, uint16_t* inout,
               size_t n) {
  Run<Combine::kSum>(kind, in, inout, n, 1.0f);
}

void MaxInto16(Float16Kind kind, const uint16_t* in, uint16_t* inout,
               size_t n) {
  Run<Combine::kMax>(kind, in, inout, n, 1.0f);
}

void Divide16(Float16Kind kind, uint16_t* data, size_t n, float divisor) {
  Run<Combine::kDivide>(kind, nullptr, data, n, divisor);
}

}  // namespace mixrt::mpi
