#include "backends/cpu/kernels/float_rows.h"

// GCC 12's AVX-512 headers trip its own -Wuninitialized (see
// softmax_rows.cc).
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "backends/cpu/capability/cpu_info.h"
#include "backends/cpu/kernels/bf16_vector.h"
#include "mixrt/float_convert.h"
#include "plugins/sdk/tensor_ref.h"

namespace mixrt::cpu {
namespace {

// With avx512_bf16 one vcvtneps2bf16 rounds 16 values (nearest even, a NaN
// to a quiet NaN as F32ToBF16Bits does) where the AVX2 integer rounding
// takes a dozen instructions per 8: casts and the fused loops' bf16
// stores were a tenth of a small bf16 train step. It flushes subnormal
// inputs to zero, so a vector holding one takes the integer path.
MIXRT_AVX512_BF16 void StoreBf16RowNative(const float* src, int64_t n,
                                          uint16_t* d) {
  const __m512i exponent = _mm512_set1_epi32(0x7f800000);
  const __m512i magnitude = _mm512_set1_epi32(0x7fffffff);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m512 v = _mm512_loadu_ps(src + i);
    const __m512i bits = _mm512_castps_si512(v);
    // Exponent zero and not +-0: subnormal.
    const __mmask16 subnormal = _mm512_testn_epi32_mask(bits, exponent) &
                                _mm512_test_epi32_mask(bits, magnitude);
    if (subnormal != 0) {
      StoreBF16x8</*kExactNaN=*/true>(_mm256_loadu_ps(src + i), d + i);
      StoreBF16x8</*kExactNaN=*/true>(_mm256_loadu_ps(src + i + 8), d + i + 8);
      continue;
    }
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(d + i),
                        reinterpret_cast<__m256i>(_mm512_cvtneps_pbh(v)));
  }
  for (; i + 8 <= n; i += 8) {
    StoreBF16x8</*kExactNaN=*/true>(_mm256_loadu_ps(src + i), d + i);
  }
  for (; i < n; ++i) d[i] = sdk::F32ToBF16Bits(src[i]);
}

bool NativeBf16Stores() {
  static const bool native = OwnAvx512Bf16Usable();
  return native;
}

}  // namespace

void LoadRow(const void* src, MixrtDtype dtype, int64_t offset, int64_t n,
             float* dst) {
  switch (dtype) {
    case MIXRT_DTYPE_F32:
      std::memcpy(dst, static_cast<const float*>(src) + offset, n * 4);
      return;
    case MIXRT_DTYPE_F16: {
      const uint16_t* s = static_cast<const uint16_t*>(src) + offset;
      int64_t i = 0;
      for (; i + 8 <= n; i += 8) {
        const __m128i h =
            _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i));
        _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(h));
      }
      for (; i < n; ++i) dst[i] = sdk::F16BitsToF32(s[i]);
      return;
    }
    case MIXRT_DTYPE_BF16: {
      const uint16_t* s = static_cast<const uint16_t*>(src) + offset;
      int64_t i = 0;
      for (; i + 8 <= n; i += 8) {  // bf16 bits are the f32's upper half.
        const __m256i wide = _mm256_cvtepu16_epi32(
            _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i)));
        _mm256_storeu_ps(dst + i,
                         _mm256_castsi256_ps(_mm256_slli_epi32(wide, 16)));
      }
      for (; i < n; ++i) dst[i] = sdk::BF16BitsToF32(s[i]);
      return;
    }
    default: {
      // Integers and bool through the SDK's exact loads.
      MixrtTensorDesc desc{};
      desc.data = const_cast<void*>(src);
      desc.dtype = dtype;
      const sdk::TensorRef ref(desc);
      for (int64_t i = 0; i < n; ++i) dst[i] = ref.LoadFloat(offset + i);
      return;
    }
  }
}

const float* FloatsAt(const void* src, MixrtDtype dtype, int64_t offset,
                      int64_t n, float* scratch) {
  if (dtype == MIXRT_DTYPE_F32) return static_cast<const float*>(src) + offset;
  LoadRow(src, dtype, offset, n, scratch);
  return scratch;
}

void StoreRow(const float* src, int64_t n, void* dst, MixrtDtype dtype,
              int64_t offset) {
  switch (dtype) {
    case MIXRT_DTYPE_F32:
      std::memcpy(static_cast<float*>(dst) + offset, src, n * 4);
      return;
    case MIXRT_DTYPE_F16: {
      uint16_t* d = static_cast<uint16_t*>(dst) + offset;
      int64_t i = 0;
      for (; i + 8 <= n; i += 8) {
        const __m128i h = _mm256_cvtps_ph(_mm256_loadu_ps(src + i),
                                          _MM_FROUND_TO_NEAREST_INT);
        _mm_storeu_si128(reinterpret_cast<__m128i*>(d + i), h);
      }
      for (; i < n; ++i) d[i] = sdk::F32ToF16Bits(src[i]);
      return;
    }
    case MIXRT_DTYPE_BF16: {
      uint16_t* d = static_cast<uint16_t*>(dst) + offset;
      if (NativeBf16Stores()) {
        StoreBf16RowNative(src, n, d);
        return;
      }
      int64_t i = 0;
      for (; i + 8 <= n; i += 8) {
        StoreBF16x8</*kExactNaN=*/true>(_mm256_loadu_ps(src + i), d + i);
      }
      for (; i < n; ++i) d[i] = sdk::F32ToBF16Bits(src[i]);
      return;
    }
    default: {
      MixrtTensorDesc desc{};
      desc.data = dst;
      desc.dtype = dtype;
      const sdk::TensorRef ref(desc);
      for (int64_t i = 0; i < n; ++i) ref.StoreFloat(offset + i, src[i]);
      return;
    }
  }
}

void RoundRowInPlace(float* x, int64_t n, MixrtDtype dtype) {
  if (dtype != MIXRT_DTYPE_BF16) {
    if (dtype == MIXRT_DTYPE_F32) return;
    uint16_t narrow[256];
    for (int64_t b = 0; b < n; b += 256) {
      const int64_t m = std::min<int64_t>(256, n - b);
      StoreRow(x + b, m, narrow, dtype, 0);
      LoadRow(narrow, dtype, 0, m, x + b);
    }
    return;
  }
  // bf16 is the f32's upper half: StoreRow's integer rounding (nearest
  // even, a NaN quieted; subnormals kept) shifted back where it stands.
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256i bits = BF16Bits8</*kExactNaN=*/true>(_mm256_loadu_ps(x + i));
    _mm256_storeu_ps(x + i, _mm256_castsi256_ps(_mm256_slli_epi32(bits, 16)));
  }
  for (; i < n; ++i) x[i] = sdk::BF16BitsToF32(sdk::F32ToBF16Bits(x[i]));
}

}  // namespace mixrt::cpu
