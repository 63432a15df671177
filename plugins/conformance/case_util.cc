#include "plugins/conformance/case_util.h"

#include "absl/status/statusor.h"
#include "core/kernels/attention.h"
#include "core/tensor/factories.h"

namespace mixrt::conformance {

Outputs One(absl::StatusOr<Tensor> t) {
  if (!t.ok()) return t.status();
  return std::vector<Tensor>{*t};
}

ToleranceFn Fixed(Tolerance t) {
  return [t](int, const std::vector<std::vector<double>>&) { return t; };
}

std::vector<std::pair<std::string, std::vector<InputSpec>>> BinaryShapes() {
  return {
      {"batch513", {{{513, 7}}, {{513, 7}}}},
      {"broadcast", {{{513, 1}}, {{7}}}},
      {"transposed",
       {{{9, 17}, DType::kF32, Values::kNormal, true}, {{9, 17}}}},
      {"empty", {{{0, 5}}, {{5}}}},
      {"scalar", {{{1}}, {{1}}}},
      {"wide",
       {{{33, 3}, DType::kF32, Values::kWide},
        {{33, 3}, DType::kF32, Values::kWide}}},
      {"special",
       {{{21, 5}, DType::kF32, Values::kSpecial},
        {{21, 5}, DType::kF32, Values::kSpecial}}},
  };
}

std::vector<InputSpec> WithDtype(std::vector<InputSpec> specs, DType dtype) {
  for (InputSpec& s : specs) {
    if (s.values != Values::kLabels) s.dtype = dtype;
  }
  return specs;
}

bool HasFusedAttention(const Device& device) {
  auto q = zeros({1, 1, 4}, DType::kF32, device);
  if (!q.ok()) return false;
  auto out = kernels::scaled_dot_product_attention(*q, *q, *q, {});
  return !absl::IsUnimplemented(out.status());
}

}  // namespace mixrt::conformance
