#include "backends/cpu/float_rows.h"

#include <immintrin.h>

#include <cstring>

#include "backends/cpu/bf16_vector.h"
#include "mixrt/float_convert.h"
#include "plugins/sdk/tensor_ref.h"

namespace mixrt::cpu {

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

}  // namespace mixrt::cpu
