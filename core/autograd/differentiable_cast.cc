#include "core/autograd/differentiable_cast.h"

#include <vector>

#include "absl/status/statusor.h"
#include "core/autograd/function_node.h"
#include "mixrt/status_macros.h"

namespace mixrt {

absl::StatusOr<Tensor> cast(const Tensor& x, DType dtype) {
  MIXRT_ASSIGN_OR_RETURN(Tensor y, x.to(dtype));
  if (y.shares_storage_with(x)) {
    // Same dtype: the same tensor, history included.
    return x;
  }
  const DType from = x.dtype();
  // Stateless: autocast caches a weight's cast for a whole region, and
  // each forward in it that uses the cast backpropagates through this node.
  RecordStateless(
      "CastBackward", {x}, {&y},
      [from](const std::vector<Tensor>& g, const std::vector<Tensor>&)
          -> absl::StatusOr<std::vector<Tensor>> {
        MIXRT_ASSIGN_OR_RETURN(Tensor dx, g[0].to(from));
        return std::vector<Tensor>{dx};
      });
  return y;
}

}  // namespace mixrt
