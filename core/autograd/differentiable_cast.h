// The differentiable dtype conversion. It sits in the autograd layer, not
// with the other mixrt:: ops in core/functional, because autocast (the
// layer between the two) casts inputs with history and must not call up.
//
//   mixrt::Tensor h = *mixrt::cast(w, mixrt::DType::kBF16);  // grad flows to w
#ifndef MIXRT_CORE_AUTOGRAD_DIFFERENTIABLE_CAST_H_
#define MIXRT_CORE_AUTOGRAD_DIFFERENTIABLE_CAST_H_

#include "absl/status/statusor.h"
#include "core/dtype.h"
#include "core/tensor/tensor.h"

namespace mixrt {

// x converted to `dtype` (round to nearest even); x itself, history
// included, when it already has that dtype. The gradient is converted back
// to x's dtype.
absl::StatusOr<Tensor> cast(const Tensor& x, DType dtype);

}  // namespace mixrt

#endif  // MIXRT_CORE_AUTOGRAD_DIFFERENTIABLE_CAST_H_
