// oneDNN matmuls run with everything but the data pointers built once per
// thread and shape: primitive, descriptors, memory objects and argument
// map, found by a key of integers. Looking a primitive up by a formatted
// string key and wrapping the operands anew cost 2-3 us a call: half of a
// 32 x 64 x 64 matmul, ~5% of a fused attention's 128 x 512 x 64 blocks.
#ifndef MIXRT_BACKENDS_CPU_ONEDNN_PREPARED_MATMUL_H_
#define MIXRT_BACKENDS_CPU_ONEDNN_PREPARED_MATMUL_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "mixrt/plugin_api.h"
#include "oneapi/dnnl/dnnl.hpp"

namespace mixrt::cpu {

// An operand: dims and strides in elements (oneDNN's order), its dtype.
struct MatmulOperand {
  MixrtDtype dtype = MIXRT_DTYPE_F32;
  dnnl::memory::dims dims, strides;
};

// An epilogue step oneDNN applies to the product in registers, after the
// bias and the sum: an eltwise function, or a binary op with a second
// tensor (c's rank; size-1 dims broadcast).
struct MatmulPostOp {
  bool binary = false;
  dnnl::algorithm algorithm = dnnl::algorithm::undef;
  float alpha = 0, beta = 0;  // The eltwise function's parameters.
  MatmulOperand operand;      // The binary op's second tensor.
};

struct MatmulShape {
  MatmulOperand a, b, c;
  MatmulOperand bias;                  // No dims: no bias.
  float sum_beta = 0;                  // c = a x b + bias + sum_beta * c.
  std::vector<MatmulPostOp> post_ops;  // Then these, in order.
  // b comes in oneDNN's preferred layout for the product (PackedWeights),
  // not as `b` describes it.
  bool packed_b = false;
};

// Integers that identify a product: every operand's dtype, dims and
// strides, the epilogue, and the thread count its work is split for.
using MatmulKey = absl::InlinedVector<int64_t, 48>;
MatmulKey PreparedMatmulKey(const MatmulShape& shape);

// Runs the matmul on this thread; `post_op_data[i]` is the second tensor of
// post_ops[i] when that one is binary. With shape.packed_b, b is in layout
// `packed_b` and nothing runs (false) when the primitive wants another.
// Throws dnnl::error when oneDNN cannot build it.
bool RunPreparedMatmul(const MatmulShape& shape, const void* a, const void* b,
                       void* c, const void* bias = nullptr,
                       const void* const* post_op_data = nullptr,
                       const dnnl::memory::desc* packed_b = nullptr);

// The layout oneDNN prefers for b in this product (shape.packed_b set).
dnnl::memory::desc PackedWeightsDesc(const MatmulShape& shape);

// b (as shape.b describes it) reordered into `packed` (PackedWeightsDesc's
// layout).
void PackWeights(const MatmulShape& shape, const void* b,
                 const dnnl::memory& packed);

// The oneDNN implementation the shape gets ("brg:avx512_core_bf16", or
// "ref:any" for its slow reference loops), or "" when oneDNN has none.
std::string PreparedMatmulImplementation(const MatmulShape& shape);

}  // namespace mixrt::cpu

#endif  // MIXRT_BACKENDS_CPU_ONEDNN_PREPARED_MATMUL_H_
