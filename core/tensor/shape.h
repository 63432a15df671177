// Shapes and strides: sizes, row-major strides, broadcasting, dim wrapping.
#ifndef MIXRT_CORE_TENSOR_SHAPE_H_
#define MIXRT_CORE_TENSOR_SHAPE_H_

#include <cstdint>
#include <string>

#include "absl/container/inlined_vector.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace mixrt {

using Shape = absl::InlinedVector<int64_t, 6>;
using Strides = absl::InlinedVector<int64_t, 6>;

// "[2, 3]"
std::string ShapeToString(absl::Span<const int64_t> shape);

// Number of elements; an error on negative sizes, more than MIXRT_MAX_DIMS
// dimensions, or a product that overflows int64.
absl::StatusOr<int64_t> CheckedNumElements(absl::Span<const int64_t> shape);

Strides ContiguousStrides(absl::Span<const int64_t> shape);

// Numpy/PyTorch broadcasting of two shapes; the error names both shapes and
// the clashing dimension. `op` prefixes the message.
absl::StatusOr<Shape> BroadcastShapes(absl::Span<const int64_t> a,
                                      absl::Span<const int64_t> b,
                                      absl::string_view op);

// Wraps a possibly negative dim into [0, ndim); error names the valid range.
absl::StatusOr<int> WrapDim(int64_t dim, int ndim);

}  // namespace mixrt

#endif  // MIXRT_CORE_TENSOR_SHAPE_H_
