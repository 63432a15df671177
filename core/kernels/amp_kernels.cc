#include "core/kernels/amp_kernels.h"

#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "core/kernels/op_checks.h"
#include "core/tensor/kernel_launch.h"
#include "mixrt/status_macros.h"

namespace mixrt::kernels {
namespace {

absl::Status CheckScalar(const Tensor& t, DType dtype, absl::string_view what,
                         absl::string_view op) {
  MIXRT_RETURN_IF_ERROR(CheckDefined(t, op));
  if (t.numel() != 1 || t.dtype() != dtype) {
    return absl::InvalidArgumentError(absl::StrCat(
        op, ": ", what, " must be a one-element ", DTypeName(dtype),
        " tensor, got ", DTypeName(t.dtype()), " ", ShapeToString(t.shape())));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status non_finite_check_and_unscale_(absl::Span<const Tensor> grads,
                                           const Tensor& found_inf,
                                           const Tensor& inv_scale) {
  constexpr absl::string_view kOp = "non_finite_check_and_unscale_";
  MIXRT_RETURN_IF_ERROR(CheckScalar(found_inf, DType::kF32, "found_inf", kOp));
  MIXRT_RETURN_IF_ERROR(CheckScalar(inv_scale, DType::kF32, "inv_scale", kOp));
  std::vector<Tensor> outs = {found_inf};
  for (const Tensor& g : grads) {
    MIXRT_RETURN_IF_ERROR(CheckFloating(g, kOp));
    MIXRT_RETURN_IF_ERROR(CheckSameDevice(found_inf, g, kOp));
    if (g.numel() > 0) outs.push_back(g);
  }
  const Tensor ins[] = {inv_scale};
  return LaunchKernel(MIXRT_OP_NON_FINITE_CHECK_AND_UNSCALE, ins, outs);
}

absl::Status update_scale_(const Tensor& scale, const Tensor& growth_tracker,
                           const Tensor& found_inf, double growth_factor,
                           double backoff_factor, int32_t growth_interval) {
  constexpr absl::string_view kOp = "update_scale_";
  MIXRT_RETURN_IF_ERROR(CheckScalar(scale, DType::kF32, "scale", kOp));
  MIXRT_RETURN_IF_ERROR(
      CheckScalar(growth_tracker, DType::kI32, "growth_tracker", kOp));
  MIXRT_RETURN_IF_ERROR(CheckScalar(found_inf, DType::kF32, "found_inf", kOp));
  if (growth_interval <= 0 || growth_factor <= 1.0 || backoff_factor <= 0 ||
      backoff_factor >= 1.0) {
    return absl::InvalidArgumentError(absl::StrCat(
        kOp,
        ": need growth_factor > 1, 0 < backoff_factor < 1 and "
        "growth_interval > 0; got ",
        growth_factor, ", ", backoff_factor, ", ", growth_interval));
  }
  MixrtUpdateScaleAttrs attrs{};
  attrs.struct_size = sizeof(attrs);
  attrs.growth_factor = growth_factor;
  attrs.backoff_factor = backoff_factor;
  attrs.growth_interval = growth_interval;
  const Tensor ins[] = {found_inf};
  const Tensor outs[] = {scale, growth_tracker};
  return LaunchKernel(MIXRT_OP_UPDATE_SCALE, ins, outs, &attrs);
}

}  // namespace mixrt::kernels
