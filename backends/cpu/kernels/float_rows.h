// Converting rows of f32/f16/bf16 (and integers) to and from f32 buffers,
// vectorized with F16C/AVX2 where the element type allows. Every kernel of
// the CPU plugin computes in f32 on such buffers, so one implementation
// serves all three float dtypes. Rounding is to nearest even, as the ABI
// requires (vcvtps2ph with _MM_FROUND_TO_NEAREST_INT does that, subnormals
// and NaN included).
#ifndef MIXRT_BACKENDS_CPU_KERNELS_FLOAT_ROWS_H_
#define MIXRT_BACKENDS_CPU_KERNELS_FLOAT_ROWS_H_

#include <cstdint>

#include "mixrt/plugin_api.h"

namespace mixrt::cpu {

// dst[i] = float(src[offset + i]) for i < n.
void LoadRow(const void* src, MixrtDtype dtype, int64_t offset, int64_t n,
             float* dst);
// src[offset, offset + n) as floats: the tensor's own memory when it is
// f32 (no copy), else LoadRow's copy in `scratch` (room for n).
const float* FloatsAt(const void* src, MixrtDtype dtype, int64_t offset,
                      int64_t n, float* scratch);
// dst[offset + i] = round(src[i]) for i < n.
void StoreRow(const float* src, int64_t n, void* dst, MixrtDtype dtype,
              int64_t offset);
// x[i] = float(round(x[i])) to dtype for i < n: what reading the value
// back from memory of that dtype gives (StoreRow then LoadRow, in place).
void RoundRowInPlace(float* x, int64_t n, MixrtDtype dtype);

}  // namespace mixrt::cpu

#endif  // MIXRT_BACKENDS_CPU_KERNELS_FLOAT_ROWS_H_
