#include "core/kernels/dropout.h"

#include "absl/strings/str_cat.h"
#include "core/kernels/op_checks.h"
#include "core/kernels/pointwise.h"
#include "core/tensor/factories.h"
#include "mixrt/status_macros.h"

namespace mixrt::kernels {

absl::StatusOr<DropoutOutput> dropout(const Tensor& x, double p,
                                      Generator* generator) {
  MIXRT_RETURN_IF_ERROR(CheckFloating(x, "dropout"));
  if (!(p >= 0 && p < 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("dropout: p must be in [0, 1), got ", p));
  }
  DropoutOutput out;
  // Uniform in f32 whatever x's dtype, so the mask does not depend on it.
  MIXRT_ASSIGN_OR_RETURN(
      Tensor u, rand(x.shape(), DType::kF32, x.device(), 0, 1, generator));
  MIXRT_ASSIGN_OR_RETURN(Tensor threshold,
                         full({}, p, DType::kF32, x.device()));
  MIXRT_ASSIGN_OR_RETURN(Tensor keep, ge(u, threshold));
  MIXRT_ASSIGN_OR_RETURN(Tensor kept,
                         full({}, 1.0 / (1.0 - p), x.dtype(), x.device()));
  MIXRT_ASSIGN_OR_RETURN(Tensor dropped, zeros({}, x.dtype(), x.device()));
  MIXRT_ASSIGN_OR_RETURN(out.scale, where(keep, kept, dropped));
  MIXRT_ASSIGN_OR_RETURN(out.y, mul(x, out.scale));
  return out;
}

absl::StatusOr<Tensor> dropout_backward(const Tensor& grad_y,
                                        const Tensor& scale) {
  MIXRT_RETURN_IF_ERROR(CheckFloating(grad_y, "dropout_backward"));
  return mul(grad_y, scale);
}

}  // namespace mixrt::kernels
