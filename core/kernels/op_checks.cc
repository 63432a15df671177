#include "core/kernels/op_checks.h"

#include "absl/strings/str_cat.h"

namespace mixrt::kernels {

absl::Status CheckDefined(const Tensor& t, absl::string_view op) {
  if (!t.defined()) {
    return absl::InvalidArgumentError(
        absl::StrCat(op, ": a tensor argument is undefined"));
  }
  return absl::OkStatus();
}

absl::Status CheckFloating(const Tensor& t, absl::string_view op) {
  if (absl::Status s = CheckDefined(t, op); !s.ok()) return s;
  if (!IsFloating(t.dtype())) {
    return absl::InvalidArgumentError(
        absl::StrCat(op,
                     ": expected a floating tensor (f32, f16 or bf16), "
                     "got ",
                     DTypeName(t.dtype())));
  }
  return absl::OkStatus();
}

absl::Status CheckSameDevice(const Tensor& a, const Tensor& b,
                             absl::string_view op) {
  if (absl::Status s = CheckDefined(a, op); !s.ok()) return s;
  if (absl::Status s = CheckDefined(b, op); !s.ok()) return s;
  if (a.device() != b.device()) {
    return absl::InvalidArgumentError(absl::StrCat(
        op, ": operands are on different devices (", a.device().ToString(),
        " and ", b.device().ToString(), "); move one with .to(device)"));
  }
  return absl::OkStatus();
}

}  // namespace mixrt::kernels
