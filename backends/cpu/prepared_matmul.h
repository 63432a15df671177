// oneDNN matmuls run with everything but the data pointers built once per
// thread and shape: primitive, descriptors, memory objects and argument
// map, found by a key of integers. Looking a primitive up by a formatted
// string key and wrapping the operands anew cost 2-3 us a call: half of a
// 32 x 64 x 64 matmul, ~5% of a fused attention's 128 x 512 x 64 blocks.
#ifndef MIXRT_BACKENDS_CPU_PREPARED_MATMUL_H_
#define MIXRT_BACKENDS_CPU_PREPARED_MATMUL_H_

#include <cstdint>

#include "mixrt/plugin_api.h"
#include "oneapi/dnnl/dnnl.hpp"

namespace mixrt::cpu {

// An operand: dims and strides in elements (oneDNN's order), its dtype.
struct MatmulOperand {
  MixrtDtype dtype = MIXRT_DTYPE_F32;
  dnnl::memory::dims dims, strides;
};

struct MatmulShape {
  MatmulOperand a, b, c;
  MatmulOperand bias;  // No dims: no bias.
  float sum_beta = 0;  // c = a x b + bias + sum_beta * c.
};

// Runs the matmul on this thread. Throws dnnl::error when oneDNN cannot
// build it.
void RunPreparedMatmul(const MatmulShape& shape, const void* a, const void* b,
                       void* c, const void* bias = nullptr);

// A matrix operand's shape: element (r, c) at data + r * row_stride +
// c * col_stride (in elements of dtype).
struct MatrixShape {
  MixrtDtype dtype;
  int64_t rows, cols, row_stride, col_stride;
};

// The blocked kernels' GEMM: c (f32, rows a.rows, cols b.cols, row stride
// ldc) = a x b (+ c with `accumulate`).
void BlockGemm(const MatrixShape& a, const void* a_data, const MatrixShape& b,
               const void* b_data, float* c, int64_t ldc, bool accumulate);

}  // namespace mixrt::cpu

#endif  // MIXRT_BACKENDS_CPU_PREPARED_MATMUL_H_
