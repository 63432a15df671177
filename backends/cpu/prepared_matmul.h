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

}  // namespace mixrt::cpu

#endif  // MIXRT_BACKENDS_CPU_PREPARED_MATMUL_H_
