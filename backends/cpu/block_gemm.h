// The small GEMMs a blocked kernel (fused attention) runs thousands of times
// per call with a handful of shapes: c (f32) = a x b, or += with
// `accumulate`. Everything but the three pointers is built once per thread
// and shape (primitive, descriptors, memory objects, argument map): looking
// a primitive up by a string key and wrapping the operands anew took a few
// microseconds per call, ~5% of a 128 x 512 x 64 f32 block GEMM.
#ifndef MIXRT_BACKENDS_CPU_BLOCK_GEMM_H_
#define MIXRT_BACKENDS_CPU_BLOCK_GEMM_H_

#include <cstdint>

#include "mixrt/plugin_api.h"

namespace mixrt::cpu {

// A matrix operand's shape: element (r, c) at data + r * row_stride +
// c * col_stride (in elements of dtype).
struct MatrixShape {
  MixrtDtype dtype;
  int64_t rows, cols, row_stride, col_stride;
};

// c (rows a.rows, cols b.cols, row stride ldc) = a x b (+ c). Throws
// dnnl::error when oneDNN cannot build the GEMM.
void BlockGemm(const MatrixShape& a, const void* a_data, const MatrixShape& b,
               const void* b_data, float* c, int64_t ldc, bool accumulate);

}  // namespace mixrt::cpu

#endif  // MIXRT_BACKENDS_CPU_BLOCK_GEMM_H_
