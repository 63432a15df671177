// Tensor::backward (declared in core/tensor/tensor.h): it runs the engine,
// so the autograd layer defines it.
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "core/autograd/engine.h"
#include "core/autograd/node.h"
#include "core/tensor/factories.h"
#include "mixrt/status_macros.h"

namespace mixrt {

absl::Status Tensor::backward() const { return backward(Tensor(), false); }

absl::Status Tensor::backward(const Tensor& gradient, bool retain_graph) const {
  Tensor g = gradient;
  if (!g.defined()) {
    if (numel() != 1) {
      return absl::InvalidArgumentError(absl::StrCat(
          "backward: grad can be implicitly created only for scalar outputs; "
          "this tensor has shape ",
          ShapeToString(shape()), " (pass a gradient)"));
    }
    MIXRT_ASSIGN_OR_RETURN(g, ones(shape(), dtype(), device()));
  } else if (g.shape() != shape()) {
    return absl::InvalidArgumentError(
        absl::StrCat("backward: gradient shape ", ShapeToString(g.shape()),
                     " does not match the tensor's ", ShapeToString(shape())));
  }
  return RunBackward({*this}, {g}, retain_graph);
}

}  // namespace mixrt
