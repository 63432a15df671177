#include "core/tensor/shape.h"

#include <algorithm>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "mixrt/plugin_api.h"

namespace mixrt {

std::string ShapeToString(absl::Span<const int64_t> shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ", "), "]");
}

absl::StatusOr<int64_t> CheckedNumElements(absl::Span<const int64_t> shape) {
  if (shape.size() > MIXRT_MAX_DIMS) {
    return absl::InvalidArgumentError(absl::StrCat(
        "shape ", ShapeToString(shape), " has ", shape.size(),
        " dimensions; at most ", MIXRT_MAX_DIMS, " are supported"));
  }
  int64_t n = 1;
  for (int64_t size : shape) {
    if (size < 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "shape ", ShapeToString(shape), " has a negative dimension"));
    }
    if (size != 0 && n > INT64_MAX / size) {
      return absl::InvalidArgumentError(absl::StrCat(
          "shape ", ShapeToString(shape), " has more than 2^63 elements"));
    }
    n *= size;
  }
  return n;
}

Strides ContiguousStrides(absl::Span<const int64_t> shape) {
  Strides strides(shape.size());
  int64_t stride = 1;
  for (int i = static_cast<int>(shape.size()) - 1; i >= 0; --i) {
    strides[i] = stride;
    stride *= std::max<int64_t>(shape[i], 1);
  }
  return strides;
}

absl::StatusOr<Shape> BroadcastShapes(absl::Span<const int64_t> a,
                                      absl::Span<const int64_t> b,
                                      absl::string_view op) {
  const size_t n = std::max(a.size(), b.size());
  Shape out(n);
  for (size_t i = 0; i < n; ++i) {
    const int64_t da = i < n - a.size() ? 1 : a[i - (n - a.size())];
    const int64_t db = i < n - b.size() ? 1 : b[i - (n - b.size())];
    if (da < 0 || db < 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          op, ": shapes ", ShapeToString(a), " and ", ShapeToString(b),
          " cannot be broadcast (a negative "
          "dimension)"));
    }
    if (da != db && da != 1 && db != 1) {
      return absl::InvalidArgumentError(
          absl::StrCat(op, ": shapes ", ShapeToString(a), " and ",
                       ShapeToString(b), " cannot be broadcast (dimension ",
                       static_cast<int64_t>(i) - static_cast<int64_t>(n), ": ",
                       da, " vs ", db, ")"));
    }
    out[i] = da == 1 ? db : da;
  }
  return out;
}

absl::StatusOr<int> WrapDim(int64_t dim, int ndim) {
  const int64_t lo = ndim == 0 ? -1 : -ndim;
  const int64_t hi = ndim == 0 ? 0 : ndim - 1;
  if (dim < lo || dim > hi) {
    return absl::InvalidArgumentError(
        absl::StrCat("dimension ", dim, " out of range: expected a value in [",
                     lo, ", ", hi, "] for a ", ndim, "-d tensor"));
  }
  return static_cast<int>(dim < 0 ? dim + std::max(ndim, 1) : dim);
}

}  // namespace mixrt
