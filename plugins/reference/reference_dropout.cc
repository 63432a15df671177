// dropout (ABI 1.1) in double: the oracle for the fused kernels.
#include <array>
#include <cstdint>

#include "mixrt/status_macros.h"
#include "plugins/reference/reference_kernels.h"
#include "plugins/sdk/call_decoders.h"
#include "plugins/sdk/philox.h"
#include "plugins/sdk/tensor_ref.h"

namespace mixrt::reference {

namespace {

sdk::Status Dropout(const sdk::KernelCall& call) {
  MIXRT_ASSIGN_OR_RETURN(const sdk::DropoutCall d, sdk::DecodeDropout(call));
  const MixrtDropoutAttrs& a = d.attrs;
  const double kept = 1.0 / (1.0 - a.p);
  uint64_t index = 0;  // Row-major over the shape, whatever the strides.
  sdk::ForEachElement<2>(
      d.out->ndim(), d.out->shape(), {d.x->strides(), d.out->strides()},
      [&](const std::array<int64_t, 2>& o) {
        const double unit = sdk::PhiloxUniform(a.seed, a.offset, index++, 0, 1);
        const double factor = sdk::DropoutKeeps(unit, a.p) ? kept : 0.0;
        d.out->StoreFloat(o[1],
                          static_cast<float>(d.x->LoadFloat(o[0]) * factor));
      });
  return sdk::OkStatus();
}

}  // namespace

std::vector<sdk::OpTable::Row> DropoutOps() {
  return {
      {MIXRT_OP_DROPOUT, Dropout},
  };
}

}  // namespace mixrt::reference
