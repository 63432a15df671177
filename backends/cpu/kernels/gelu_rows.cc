#include "backends/cpu/kernels/gelu_rows.h"

#include <immintrin.h>

#include "backends/cpu/capability/cpu_info.h"
#include "plugins/sdk/pointwise_math.h"

// libmvec's AVX2 and AVX-512 variants (the x86-64 vector ABI's names for
// erfcf/expf on 8 and 16 floats), documented to within 4 ulp.
extern "C" __m256 _ZGVdN8v_erfcf(__m256);
extern "C" __m256 _ZGVdN8v_expf(__m256);
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wpsabi"  // Called from AVX-512 code only.
extern "C" __m512 _ZGVeN16v_erfcf(__m512);
extern "C" __m512 _ZGVeN16v_expf(__m512);
#pragma GCC diagnostic pop

namespace mixrt::cpu {
namespace {

constexpr float kMinusRsqrt2 = -0.7071067811865476f;
constexpr float kRsqrt2Pi = 0.3989422804014327f;

// Sixteen lanes where OwnAvx512Usable(): the GELU and its gradient were
// 10% of a bf16 GPT train step on eight. The first multiple of 16 elements
// of the row; returns how many.
MIXRT_AVX512 int64_t GeluRow16(const float* x, int64_t n, float* out) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m512 v = _mm512_loadu_ps(x + i);
    const __m512 c =
        _ZGVeN16v_erfcf(_mm512_mul_ps(v, _mm512_set1_ps(kMinusRsqrt2)));
    _mm512_storeu_ps(out + i,
                     _mm512_mul_ps(_mm512_mul_ps(_mm512_set1_ps(0.5f), v), c));
  }
  return i;
}

MIXRT_AVX512 int64_t GeluGradRow16(const float* g, const float* x, int64_t n,
                                   float* out) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m512 v = _mm512_loadu_ps(x + i);
    const __m512 cdf = _mm512_mul_ps(
        _mm512_set1_ps(0.5f),
        _ZGVeN16v_erfcf(_mm512_mul_ps(v, _mm512_set1_ps(kMinusRsqrt2))));
    const __m512 pdf =
        _mm512_mul_ps(_ZGVeN16v_expf(_mm512_mul_ps(_mm512_set1_ps(-0.5f),
                                                   _mm512_mul_ps(v, v))),
                      _mm512_set1_ps(kRsqrt2Pi));
    _mm512_storeu_ps(out + i, _mm512_mul_ps(_mm512_loadu_ps(g + i),
                                            _mm512_fmadd_ps(v, pdf, cdf)));
  }
  return i;
}

// Both at once: one erfcf for the GELU and its derivative. Lanes as
// GeluRow16 and GeluGradRow16 compute them, g null meaning ones (a product
// with 1 is exact).
MIXRT_AVX512 int64_t GeluWithGradRow16(const float* x, const float* g,
                                       int64_t n, float* y, float* d) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m512 v = _mm512_loadu_ps(x + i);
    const __m512 c =
        _ZGVeN16v_erfcf(_mm512_mul_ps(v, _mm512_set1_ps(kMinusRsqrt2)));
    _mm512_storeu_ps(y + i,
                     _mm512_mul_ps(_mm512_mul_ps(_mm512_set1_ps(0.5f), v), c));
    const __m512 pdf =
        _mm512_mul_ps(_ZGVeN16v_expf(_mm512_mul_ps(_mm512_set1_ps(-0.5f),
                                                   _mm512_mul_ps(v, v))),
                      _mm512_set1_ps(kRsqrt2Pi));
    __m512 slope =
        _mm512_fmadd_ps(v, pdf, _mm512_mul_ps(_mm512_set1_ps(0.5f), c));
    if (g != nullptr) slope = _mm512_mul_ps(_mm512_loadu_ps(g + i), slope);
    _mm512_storeu_ps(d + i, slope);
  }
  return i;
}

}  // namespace

void GeluWithGradRow(const float* x, const float* g, int64_t n, float* y,
                     float* d) {
  int64_t i = OwnAvx512Usable() ? GeluWithGradRow16(x, g, n, y, d) : 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 v = _mm256_loadu_ps(x + i);
    const __m256 c =
        _ZGVdN8v_erfcf(_mm256_mul_ps(v, _mm256_set1_ps(kMinusRsqrt2)));
    _mm256_storeu_ps(y + i,
                     _mm256_mul_ps(_mm256_mul_ps(_mm256_set1_ps(0.5f), v), c));
    const __m256 pdf =
        _mm256_mul_ps(_ZGVdN8v_expf(_mm256_mul_ps(_mm256_set1_ps(-0.5f),
                                                  _mm256_mul_ps(v, v))),
                      _mm256_set1_ps(kRsqrt2Pi));
    __m256 slope =
        _mm256_fmadd_ps(v, pdf, _mm256_mul_ps(_mm256_set1_ps(0.5f), c));
    if (g != nullptr) slope = _mm256_mul_ps(_mm256_loadu_ps(g + i), slope);
    _mm256_storeu_ps(d + i, slope);
  }
  for (; i < n; ++i) {
    y[i] = sdk::ApplyUnary<float>(MIXRT_UNARY_GELU, x[i], 0.0f, 0.0f);
    const float slope =
        sdk::UnaryDerivative<float>(MIXRT_UNARY_GELU, x[i], 0.0f, 0.0f);
    d[i] = g != nullptr ? g[i] * slope : slope;
  }
}

void GeluRow(const float* x, int64_t n, float* out) {
  int64_t i = OwnAvx512Usable() ? GeluRow16(x, n, out) : 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 v = _mm256_loadu_ps(x + i);
    const __m256 c =
        _ZGVdN8v_erfcf(_mm256_mul_ps(v, _mm256_set1_ps(kMinusRsqrt2)));
    _mm256_storeu_ps(out + i,
                     _mm256_mul_ps(_mm256_mul_ps(_mm256_set1_ps(0.5f), v), c));
  }
  for (; i < n; ++i) {
    out[i] = sdk::ApplyUnary<float>(MIXRT_UNARY_GELU, x[i], 0.0f, 0.0f);
  }
}

void GeluGradRow(const float* g, const float* x, int64_t n, float* out) {
  int64_t i = OwnAvx512Usable() ? GeluGradRow16(g, x, n, out) : 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 v = _mm256_loadu_ps(x + i);
    const __m256 cdf = _mm256_mul_ps(
        _mm256_set1_ps(0.5f),
        _ZGVdN8v_erfcf(_mm256_mul_ps(v, _mm256_set1_ps(kMinusRsqrt2))));
    const __m256 pdf =
        _mm256_mul_ps(_ZGVdN8v_expf(_mm256_mul_ps(_mm256_set1_ps(-0.5f),
                                                  _mm256_mul_ps(v, v))),
                      _mm256_set1_ps(kRsqrt2Pi));
    _mm256_storeu_ps(out + i, _mm256_mul_ps(_mm256_loadu_ps(g + i),
                                            _mm256_fmadd_ps(v, pdf, cdf)));
  }
  for (; i < n; ++i) {
    out[i] =
        g[i] * sdk::UnaryDerivative<float>(MIXRT_UNARY_GELU, x[i], 0.0f, 0.0f);
  }
}

}  // namespace mixrt::cpu
