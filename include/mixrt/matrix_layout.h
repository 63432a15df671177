// How a matmul operand lies in memory, read off its shape and strides: the
// one definition the host and the GPU plugins share for
// MIXRT_DEVICE_FLAG_MATMUL_TRANSPOSED_OPERANDS (plugin_api.h).
#ifndef MIXRT_MATRIX_LAYOUT_H_
#define MIXRT_MATRIX_LAYOUT_H_

#include <cstdint>

namespace mixrt {

// True when a [..., r, c] operand is the transpose of a dense row-major
// [..., c, r] buffer: strides (..., 1, r), r > 1 and c > 1 (a single row or
// column is made dense for free, so it never takes this form), and every
// batch dim of extent > 1 dense over the matrices after it. Such an operand
// is a column-major matrix with leading dimension r, which BLAS libraries
// read directly (op T).
inline bool IsTransposedDenseMatrix(int ndim, const int64_t* shape,
                                    const int64_t* strides) {
  if (ndim < 2) return false;
  const int64_t r = shape[ndim - 2], c = shape[ndim - 1];
  if (r <= 1 || c <= 1) return false;
  if (strides[ndim - 2] != 1 || strides[ndim - 1] != r) return false;
  int64_t expected = r * c;
  for (int d = ndim - 3; d >= 0; --d) {
    if (shape[d] != 1 && strides[d] != expected) return false;
    expected *= shape[d];
  }
  return true;
}

}  // namespace mixrt

#endif  // MIXRT_MATRIX_LAYOUT_H_
