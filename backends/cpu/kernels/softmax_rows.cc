#include "backends/cpu/kernels/softmax_rows.h"

// GCC 12's AVX-512 headers build their "undefined" vectors from
// themselves (`__m512 __Y = __Y;`), which its own -Wuninitialized flags at
// every reduce/cvt intrinsic: a header false positive, not this code's.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <cmath>
#include <functional>
#include <type_traits>

#include "backends/cpu/capability/cpu_info.h"
#include "backends/cpu/kernels/bf16_vector.h"
#include "mixrt/float_convert.h"

namespace mixrt::cpu {
namespace {

// The exponentials, not the GEMMs, are what fused attention spends most of
// its time on, and GCC 12 emitted the plain loops scalar (no ymm in them,
// although -fopt-info reported them vectorized): intrinsics.
//
// exp(x), x <= 0, as 2^t with t = x log2 e (x rounded to f32 first, as
// before the multiply: folding log2 e into the softmax multiplier cost ~1e-6
// relative at x ~ -12): t = n + r, n rounded to nearest, |r| <= 1/2, and 2^r by
// its Taylor polynomial in r (the coefficients ln2^k / k!): degree 6 for f32
// weights (relative error ~1e-7), degree 4 for bf16 weights (4e-5, a
// hundredth of bf16's rounding; two FMAs fewer per 16 weights); exactly 0
// for t below -125 (so -inf, a masked score, gives 0); NaN stays NaN (a NaN
// score must reach the output, where the GradScaler looks for it). Working
// in t saves the clamp and the ln2 multiply of the argument, per element.
constexpr float kLog2E = 1.44269504088896341f;
constexpr float kFloor = -125.0f;  // In t.
constexpr float kC[7] = {1.0f,
                         0.693147180559945309f,
                         0.240226506959100712f,
                         0.0555041086648215800f,
                         0.00961812910762847716f,
                         0.00133335581464284434f,
                         0.000154035303933816099f};
constexpr int kF32Degree = 6, kBf16Degree = 4;

// The polynomial's degree for weights of type Out.
template <typename Out>
constexpr int DegreeFor() {
  return std::is_same_v<Out, float> ? kF32Degree : kBf16Degree;
}

// The scalar tails, computed as the vector lanes are (same FMAs).
template <int kDegree>
inline float Exp2NonPositive(float t) {
  if (std::isnan(t)) return t;
  if (t < kFloor) return 0.0f;
  const float n = std::nearbyint(t);
  const float r = t - n;
  float p = std::fma(kC[kDegree], r, kC[kDegree - 1]);
  for (int d = kDegree - 2; d >= 0; --d) p = std::fma(p, r, kC[d]);
  const uint32_t bits = static_cast<uint32_t>(static_cast<int32_t>(n) + 127)
                        << 23;
  return p * __builtin_bit_cast(float, bits);
}

// ---- AVX2 (8 lanes): the plugin's baseline ----

// 2^t on 8 lanes (see Exp2NonPositive).
template <int kDegree>
inline __m256 Exp2x8(__m256 t) {
  const __m256 zero = _mm256_cmp_ps(t, _mm256_set1_ps(kFloor), _CMP_LT_OQ);
  const __m256 n =
      _mm256_round_ps(t, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  const __m256 r = _mm256_sub_ps(t, n);
  __m256 p = _mm256_fmadd_ps(_mm256_set1_ps(kC[kDegree]), r,
                             _mm256_set1_ps(kC[kDegree - 1]));
  for (int d = kDegree - 2; d >= 0; --d) {
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(kC[d]));
  }
  // Lanes below the floor (n possibly -inf) are garbage until the andnot.
  const __m256i bits = _mm256_slli_epi32(
      _mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
  return _mm256_andnot_ps(zero, _mm256_mul_ps(p, _mm256_castsi256_ps(bits)));
}

inline float Sum8(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

inline float Max8(__m256 v) {
  __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  m = _mm_max_ps(m, _mm_movehl_ps(m, m));
  m = _mm_max_ss(m, _mm_movehdup_ps(m));
  return _mm_cvtss_f32(m);
}

// The scalar tail of a row's maximum, from the vector part's m and nan.
float FinishMax(const float* x, int64_t j, int64_t n, float m, bool nan) {
  for (; j < n; ++j) {
    nan |= std::isnan(x[j]);
    m = x[j] > m ? x[j] : m;
  }
  return nan ? NAN : m;
}

float RowMaxAvx2(const float* x, int64_t n) {
  __m256 m8 = _mm256_set1_ps(-INFINITY), nan8 = _mm256_setzero_ps();
  int64_t j = 0;
  for (; j + 8 <= n; j += 8) {
    const __m256 v = _mm256_loadu_ps(x + j);
    m8 = _mm256_max_ps(m8, v);
    nan8 = _mm256_or_ps(nan8, _mm256_cmp_ps(v, v, _CMP_UNORD_Q));
  }
  return FinishMax(x, j, n, Max8(m8), _mm256_movemask_ps(nan8) != 0);
}

template <typename Out>
inline void StoreTail(float p, Out* out) {
  if constexpr (std::is_same_v<Out, float>) {
    *out = p;
  } else {
    *out = sdk::F32ToBF16Bits(p);
  }
}

template <typename Out>
float ExpRowAvx2(const float* x, int64_t n, float shift, float mult, Out* out) {
  const __m256 s8 = _mm256_set1_ps(shift), m8 = _mm256_set1_ps(mult);
  const __m256 l8 = _mm256_set1_ps(kLog2E);
  __m256 acc = _mm256_setzero_ps();
  int64_t j = 0;
  for (; j + 8 <= n; j += 8) {
    const __m256 p = Exp2x8<DegreeFor<Out>()>(_mm256_mul_ps(
        _mm256_mul_ps(_mm256_sub_ps(_mm256_loadu_ps(x + j), s8), m8), l8));
    acc = _mm256_add_ps(acc, p);
    if constexpr (std::is_same_v<Out, float>) {
      _mm256_storeu_ps(out + j, p);
    } else {
      StoreBF16x8</*kExactNaN=*/false>(p, out + j);
    }
  }
  float total = Sum8(acc);
  for (; j < n; ++j) {
    const float p =
        Exp2NonPositive<DegreeFor<Out>()>((x[j] - shift) * mult * kLog2E);
    StoreTail(p, out + j);
    total += p;
  }
  return total;
}

void ScaleRowAvx2(float* x, int64_t n, float factor) {
  const __m256 f8 = _mm256_set1_ps(factor);
  int64_t j = 0;
  for (; j + 8 <= n; j += 8) {
    _mm256_storeu_ps(x + j, _mm256_mul_ps(_mm256_loadu_ps(x + j), f8));
  }
  for (; j < n; ++j) x[j] *= factor;
}

// ---- AVX-512 (16 lanes), compiled for it function by function ----

// Exp2x8 on 16 lanes, bit for bit: the same reduction and polynomial, and
// p * 2^n through vscalefps (exact for the kept lanes, n >= -125).
template <int kDegree>
MIXRT_AVX512 inline __m512 Exp2x16(__m512 t) {
  // Lanes kept: t >= floor or NaN (not-less-than, unordered true).
  const __mmask16 keep =
      _mm512_cmp_ps_mask(t, _mm512_set1_ps(kFloor), _CMP_NLT_UQ);
  const __m512 n =
      _mm512_roundscale_ps(t, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  const __m512 r = _mm512_sub_ps(t, n);
  __m512 p = _mm512_fmadd_ps(_mm512_set1_ps(kC[kDegree]), r,
                             _mm512_set1_ps(kC[kDegree - 1]));
  for (int d = kDegree - 2; d >= 0; --d) {
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(kC[d]));
  }
  return _mm512_maskz_mov_ps(keep, _mm512_scalef_ps(p, n));
}

// bf16 rounding (nearest even; NaN not preserved) of 16 lanes.
MIXRT_AVX512 inline void StoreBF16x16(__m512 v, uint16_t* out) {
  const __m512i b = _mm512_castps_si512(v);
  const __m512i lsb =
      _mm512_and_si512(_mm512_srli_epi32(b, 16), _mm512_set1_epi32(1));
  const __m512i r = _mm512_srli_epi32(
      _mm512_add_epi32(_mm512_add_epi32(b, _mm512_set1_epi32(0x7fff)), lsb),
      16);
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(out),
                      _mm512_cvtepi32_epi16(r));
}

MIXRT_AVX512 float RowMaxAvx512(const float* x, int64_t n) {
  __m512 m16 = _mm512_set1_ps(-INFINITY);
  __mmask16 nan = 0;
  int64_t j = 0;
  for (; j + 16 <= n; j += 16) {
    const __m512 v = _mm512_loadu_ps(x + j);
    m16 = _mm512_max_ps(m16, v);
    nan |= _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
  }
  return FinishMax(x, j, n, _mm512_reduce_max_ps(m16), nan != 0);
}

// With avx512_bf16 one vcvtneps2bf16 rounds (nearest even) instead of five
// integer ops; it flushes subnormal inputs to zero, which for a softmax
// weight (below 1.2e-38 of the row's largest, 1) changes nothing visible.
MIXRT_AVX512_BF16 inline void StoreBF16x16Native(__m512 v, uint16_t* out) {
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(out),
                      reinterpret_cast<__m256i>(_mm512_cvtneps_pbh(v)));
}

struct Bf16ByIntegers {};
struct Bf16ByInstruction {};

// Compiled for avx512_bf16 in every instantiation so that the native
// rounding inlines (a call per 16 lanes cost 5% of a forward); the
// instantiations without it contain no bf16 instruction (GCC 12 emits them
// only for the intrinsics) and also run on AVX-512 CPUs without BF16.
template <typename Out, typename Rounding = Bf16ByIntegers>
MIXRT_AVX512_BF16 float ExpRowAvx512(const float* x, int64_t n, float shift,
                                     float mult, Out* out) {
  const __m512 s16 = _mm512_set1_ps(shift), m16 = _mm512_set1_ps(mult);
  const __m512 l16 = _mm512_set1_ps(kLog2E);
  __m512 acc = _mm512_setzero_ps();
  int64_t j = 0;
  for (; j + 16 <= n; j += 16) {
    const __m512 p = Exp2x16<DegreeFor<Out>()>(_mm512_mul_ps(
        _mm512_mul_ps(_mm512_sub_ps(_mm512_loadu_ps(x + j), s16), m16), l16));
    acc = _mm512_add_ps(acc, p);
    if constexpr (std::is_same_v<Out, float>) {
      _mm512_storeu_ps(out + j, p);
    } else if constexpr (std::is_same_v<Rounding, Bf16ByInstruction>) {
      StoreBF16x16Native(p, out + j);
    } else {
      StoreBF16x16(p, out + j);
    }
  }
  if constexpr (std::is_same_v<Out, float>) {
    // f32 tails as masked lanes: a short row (a classifier's 10 classes) is
    // all tail, and the scalar tail's nearbyint call per element cost ~9
    // ns each. The lanes compute what the scalar tail does, bit for bit.
    if (j < n) {
      const __mmask16 m = static_cast<__mmask16>((1u << (n - j)) - 1);
      const __m512 p = _mm512_maskz_mov_ps(
          m, Exp2x16<DegreeFor<Out>()>(_mm512_mul_ps(
                 _mm512_mul_ps(
                     _mm512_sub_ps(_mm512_maskz_loadu_ps(m, x + j), s16), m16),
                 l16)));
      acc = _mm512_add_ps(acc, p);
      _mm512_mask_storeu_ps(out + j, m, p);
      j = n;
    }
  }
  float total = _mm512_reduce_add_ps(acc);
  for (; j < n; ++j) {
    const float p =
        Exp2NonPositive<DegreeFor<Out>()>((x[j] - shift) * mult * kLog2E);
    StoreTail(p, out + j);
    total += p;
  }
  return total;
}

MIXRT_AVX512 void ScaleRowAvx512(float* x, int64_t n, float factor) {
  const __m512 f16 = _mm512_set1_ps(factor);
  int64_t j = 0;
  for (; j + 16 <= n; j += 16) {
    _mm512_storeu_ps(x + j, _mm512_mul_ps(_mm512_loadu_ps(x + j), f16));
  }
  for (; j < n; ++j) x[j] *= factor;
}

#undef MIXRT_AVX512

}  // namespace

const SoftmaxRowKernels& Avx2SoftmaxRows() {
  static const SoftmaxRowKernels k = {"avx2", RowMaxAvx2, ExpRowAvx2<float>,
                                      ExpRowAvx2<uint16_t>, ScaleRowAvx2};
  return k;
}

const SoftmaxRowKernels& Avx512SoftmaxRows() {
  static const SoftmaxRowKernels k = {"avx512", RowMaxAvx512,
                                      ExpRowAvx512<float>,
                                      ExpRowAvx512<uint16_t>, ScaleRowAvx512};
  return k;
}

const SoftmaxRowKernels& Avx512Bf16SoftmaxRows() {
  static const SoftmaxRowKernels k = {
      "avx512_bf16", RowMaxAvx512, ExpRowAvx512<float>,
      ExpRowAvx512<uint16_t, Bf16ByInstruction>, ScaleRowAvx512};
  return k;
}

const SoftmaxRowKernels& SoftmaxRows() {
  static const SoftmaxRowKernels& k =
      [] {
        const CpuInfo& cpu = GetCpuInfo();
        if (!OwnAvx512Usable()) return std::cref(Avx2SoftmaxRows());
        return std::cref(cpu.avx512_bf16 ? Avx512Bf16SoftmaxRows()
                                         : Avx512SoftmaxRows());
      }()
          .get();
  return k;
}

}  // namespace mixrt::cpu
