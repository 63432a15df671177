// fill, copy (casts), arange, random.
#include <array>
#include <cstdint>

#include "absl/strings/str_cat.h"
#include "mixrt/status_macros.h"
#include "plugins/reference/reference_kernels.h"
#include "plugins/sdk/philox.h"
#include "plugins/sdk/tensor_ref.h"

namespace mixrt::reference {
namespace {

using sdk::TensorRef;

// out[i] = value_at(i) over the flattened output, as a double.
template <typename Fn>
void Generate(const TensorRef& out, Fn&& value_at) {
  int64_t i = 0;
  const bool floating = sdk::IsFloatingDtype(out.dtype());
  sdk::ForEachElement<1>(out.ndim(), out.shape(), {out.strides()},
                         [&](const std::array<int64_t, 1>& o) {
                           const double v = value_at(i++);
                           if (floating) {
                             out.StoreFloat(o[0], static_cast<float>(v));
                           } else {
                             out.StoreInt(o[0], static_cast<int64_t>(v));
                           }
                         });
}

sdk::Status Fill(const sdk::KernelCall& call) {
  MIXRT_ASSIGN_OR_RETURN(auto attrs, call.GetAttrs<MixrtScalarAttrs>());
  const double value = attrs->value;
  Generate(call.outputs[0], [&](int64_t) { return value; });
  return sdk::OkStatus();
}

sdk::Status Copy(const sdk::KernelCall& call) {
  MIXRT_RETURN_IF_ERROR(ExpectSameShapes(call));
  const TensorRef& in = call.inputs[0];
  const TensorRef& out = call.outputs[0];
  const bool float_path =
      sdk::IsFloatingDtype(in.dtype()) || sdk::IsFloatingDtype(out.dtype());
  sdk::ForEachElement<2>(out.ndim(), out.shape(), {in.strides(), out.strides()},
                         [&](const std::array<int64_t, 2>& o) {
                           if (float_path) {
                             out.StoreFloat(o[1], in.LoadFloat(o[0]));
                           } else {
                             out.StoreInt(o[1], in.LoadInt(o[0]));
                           }
                         });
  return sdk::OkStatus();
}

sdk::Status Arange(const sdk::KernelCall& call) {
  MIXRT_ASSIGN_OR_RETURN(auto attrs, call.GetAttrs<MixrtArangeAttrs>());
  const double start = attrs->start;
  const double step = attrs->step;
  Generate(call.outputs[0],
           [&](int64_t i) { return start + static_cast<double>(i) * step; });
  return sdk::OkStatus();
}

sdk::Status Random(const sdk::KernelCall& call) {
  MIXRT_ASSIGN_OR_RETURN(auto attrs, call.GetAttrs<MixrtRandomAttrs>());
  if (!sdk::IsFloatingDtype(call.outputs[0].dtype())) {
    return sdk::InvalidArgumentError("random ops need a floating output");
  }
  const MixrtRandomAttrs a = *attrs;
  const bool normal = call.op == MIXRT_OP_RANDOM_NORMAL;
  Generate(call.outputs[0], [&](int64_t i) {
    const uint64_t index = static_cast<uint64_t>(i);
    return normal ? sdk::PhiloxNormal(a.seed, a.offset, index, a.a, a.b)
                  : sdk::PhiloxUniform(a.seed, a.offset, index, a.a, a.b);
  });
  return sdk::OkStatus();
}

}  // namespace

std::vector<sdk::OpTable::Row> CreationOps() {
  return {
      {MIXRT_OP_FILL, WithArity<0, Fill>},
      {MIXRT_OP_COPY, WithArity<1, Copy>},
      {MIXRT_OP_ARANGE, WithArity<0, Arange>},
      {MIXRT_OP_RANDOM_UNIFORM, WithArity<0, Random>},
      {MIXRT_OP_RANDOM_NORMAL, WithArity<0, Random>},
  };
}

}  // namespace mixrt::reference
