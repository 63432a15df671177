// Exact GELU and its derivative over f32 rows, sixteen lanes at a time
// (eight without AVX-512) through glibc's vector erfcf and expf (libmvec,
// part of every glibc since 2.35): a scalar erfcf call per element was 8%
// of a GPT train step.
#ifndef MIXRT_BACKENDS_CPU_KERNELS_GELU_ROWS_H_
#define MIXRT_BACKENDS_CPU_KERNELS_GELU_ROWS_H_

#include <cstdint>

namespace mixrt::cpu {

// out[i] = x[i] / 2 * erfc(-x[i] / sqrt(2)).
void GeluRow(const float* x, int64_t n, float* out);
// out[i] = g[i] * (cdf(x[i]) + x[i] pdf(x[i])), sdk::UnaryDerivative's
// formula.
void GeluGradRow(const float* g, const float* x, int64_t n, float* out);
// y = GeluRow(x) and d = GeluGradRow(g, x), bit for bit, from one erfcf per
// element; g null stands for ones.
void GeluWithGradRow(const float* x, const float* g, int64_t n, float* y,
                     float* d);

}  // namespace mixrt::cpu

#endif  // MIXRT_BACKENDS_CPU_KERNELS_GELU_ROWS_H_
