// Argument checks shared by the core ops; each error names the op.
#ifndef MIXRT_CORE_KERNELS_OP_CHECKS_H_
#define MIXRT_CORE_KERNELS_OP_CHECKS_H_

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "core/tensor/tensor.h"

namespace mixrt::kernels {

// (CheckDefined, for any tensor, is the tensor layer's: core/tensor/tensor.h.)

// Defined and of a floating dtype.
absl::Status CheckFloating(const Tensor& t, absl::string_view op);
// Both defined and on one device.
absl::Status CheckSameDevice(const Tensor& a, const Tensor& b,
                             absl::string_view op);

}  // namespace mixrt::kernels

#endif  // MIXRT_CORE_KERNELS_OP_CHECKS_H_
