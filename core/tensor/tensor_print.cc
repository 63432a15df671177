// Tensor::ToString, in PyTorch's layout.
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/tensor/tensor.h"

namespace mixrt {
namespace {

constexpr int64_t kSummarizeAbove = 1000;
constexpr int64_t kEdgeItems = 3;

std::string FormatValue(double v, bool floating) {
  if (!floating) return absl::StrFormat("%.0f", v);
  return absl::StrFormat("%.4g", v);
}

void Render(const std::vector<double>& values, const Shape& shape,
            const Strides& strides, int dim, int64_t base, bool floating,
            bool summarize, std::string* out) {
  if (dim == static_cast<int>(shape.size())) {
    absl::StrAppend(out, FormatValue(values[base], floating));
    return;
  }
  absl::StrAppend(out, "[");
  const int64_t n = shape[dim];
  for (int64_t i = 0; i < n; ++i) {
    if (summarize && n > 2 * kEdgeItems && i == kEdgeItems) {
      absl::StrAppend(out, "..., ");
      i = n - kEdgeItems - 1;
      continue;
    }
    Render(values, shape, strides, dim + 1, base + i * strides[dim], floating,
           summarize, out);
    if (i + 1 < n) absl::StrAppend(out, ", ");
  }
  absl::StrAppend(out, "]");
}

}  // namespace

std::string Tensor::ToString() const {
  if (!defined()) return "tensor(undefined)";
  const std::string suffix = absl::StrCat(
      ", dtype=", DTypeName(dtype()), ", device=", device().ToString(), ")");
  absl::StatusOr<std::vector<double>> values = to_double_vector();
  if (!values.ok()) {
    return absl::StrCat("tensor(<unreadable: ", values.status().message(), ">",
                        suffix);
  }
  std::string body;
  Render(*values, shape(), ContiguousStrides(shape()), 0, 0,
         IsFloating(dtype()), numel() > kSummarizeAbove, &body);
  return absl::StrCat("tensor(", body, suffix);
}

}  // namespace mixrt
