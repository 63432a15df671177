#include "core/kernels/op_checks.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "mixrt/status_macros.h"

namespace mixrt::kernels {

absl::Status CheckFloating(const Tensor& t, absl::string_view op) {
  MIXRT_RETURN_IF_ERROR(CheckDefined(t, op));
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
  MIXRT_RETURN_IF_ERROR(CheckDefined(a, op));
  MIXRT_RETURN_IF_ERROR(CheckDefined(b, op));
  if (a.device() != b.device()) {
    return absl::InvalidArgumentError(absl::StrCat(
        op, ": operands are on different devices (", a.device().ToString(),
        " and ", b.device().ToString(), "); move one with .to(device)"));
  }
  return absl::OkStatus();
}

}  // namespace mixrt::kernels
