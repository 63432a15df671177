// dropout (ABI 1.1) in double: the oracle for the fused kernels.
#include <array>
#include <cstdint>

#include "mixrt/status_macros.h"
#include "plugins/reference/reference_kernels.h"
#include "plugins/sdk/call_decoders.h"
#include "plugins/sdk/philox.h"
#include "plugins/sdk/tensor_ref.h"

namespace mixrt::reference {

absl::Status RunDropout(const sdk::KernelCall& call) {
  MIXRT_ASSIGN_OR_RETURN(const MixrtDropoutAttrs* attrs,
                         sdk::DecodeDropout(call));
  const MixrtDropoutAttrs a = *attrs;
  const sdk::TensorRef& x = call.inputs[0];
  const sdk::TensorRef& out = call.outputs[0];
  const double kept = 1.0 / (1.0 - a.p);
  uint64_t index = 0;  // Row-major over the shape, whatever the strides.
  sdk::ForEachElement<2>(
      out.ndim(), out.shape(), {x.strides(), out.strides()},
      [&](const std::array<int64_t, 2>& o) {
        const double unit = sdk::PhiloxUniform(a.seed, a.offset, index++, 0, 1);
        const double factor = sdk::DropoutKeeps(unit, a.p) ? kept : 0.0;
        out.StoreFloat(o[1], static_cast<float>(x.LoadFloat(o[0]) * factor));
      });
  return absl::OkStatus();
}

}  // namespace mixrt::reference
