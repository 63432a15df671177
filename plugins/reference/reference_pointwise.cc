// binary, unary, unary backward, compare, where.
#include <array>
#include <cstdint>

#include "absl/strings/str_cat.h"
#include "mixrt/status_macros.h"
#include "plugins/reference/reference_kernels.h"
#include "plugins/sdk/pointwise_math.h"
#include "plugins/sdk/tensor_ref.h"

namespace mixrt::reference {
namespace {

using sdk::TensorRef;

sdk::Status Binary(const sdk::KernelCall& call) {
  MIXRT_ASSIGN_OR_RETURN(auto attrs, sdk::BinaryAttrs(call));
  const auto kind = static_cast<MixrtBinaryKind>(attrs.kind);
  const TensorRef& x = call.inputs[0];
  const TensorRef& y = call.inputs[1];
  const TensorRef& out = call.outputs[0];
  const std::array<const int64_t*, 3> strides = {x.strides(), y.strides(),
                                                 out.strides()};
  if (sdk::IsFloatingDtype(out.dtype())) {
    sdk::ForEachElement<3>(
        out.ndim(), out.shape(), strides, [&](const std::array<int64_t, 3>& o) {
          out.StoreFloat(o[2],
                         static_cast<float>(sdk::ApplyBinary<double>(
                             kind, x.LoadFloat(o[0]), y.LoadFloat(o[1]))));
        });
    return sdk::OkStatus();
  }
  bool bad_divisor = false;
  sdk::ForEachElement<3>(
      out.ndim(), out.shape(), strides, [&](const std::array<int64_t, 3>& o) {
        const int64_t d = y.LoadInt(o[1]);
        bad_divisor |= (kind == MIXRT_BINARY_DIV && d == 0) ||
                       (kind == MIXRT_BINARY_POW && d < 0);
      });
  if (bad_divisor) {
    return sdk::InvalidArgumentError(
        kind == MIXRT_BINARY_DIV
            ? "integer division by zero"
            : "integers cannot be raised to negative integer powers");
  }
  sdk::ForEachElement<3>(
      out.ndim(), out.shape(), strides, [&](const std::array<int64_t, 3>& o) {
        out.StoreInt(
            o[2], sdk::ApplyIntBinary(kind, x.LoadInt(o[0]), y.LoadInt(o[1])));
      });
  return sdk::OkStatus();
}

sdk::Status Unary(const sdk::KernelCall& call, bool backward) {
  MIXRT_ASSIGN_OR_RETURN(auto attrs, sdk::UnaryAttrs(call));
  const auto kind = static_cast<MixrtUnaryKind>(attrs.kind);
  const TensorRef& out = call.outputs[0];
  const TensorRef& x = call.inputs[backward ? 1 : 0];
  const TensorRef& g = call.inputs[0];
  if (!sdk::IsFloatingDtype(out.dtype())) {
    const bool int_ok = !backward && out.dtype() != MIXRT_DTYPE_BOOL &&
                        (kind == MIXRT_UNARY_NEG || kind == MIXRT_UNARY_ABS);
    if (!int_ok) {
      return sdk::InvalidArgumentError(
          absl::StrCat("unary kind ", kind, " needs a floating tensor"));
    }
    sdk::ForEachElement<2>(
        out.ndim(), out.shape(), {x.strides(), out.strides()},
        [&](const std::array<int64_t, 2>& o) {
          const uint64_t v = static_cast<uint64_t>(x.LoadInt(o[0]));
          const bool negate =
              kind == MIXRT_UNARY_NEG || static_cast<int64_t>(v) < 0;
          out.StoreInt(o[1], static_cast<int64_t>(negate ? 0 - v : v));
        });
    return sdk::OkStatus();
  }
  const double alpha = attrs.alpha;
  const double beta = attrs.beta;
  sdk::ForEachElement<3>(
      out.ndim(), out.shape(), {x.strides(), g.strides(), out.strides()},
      [&](const std::array<int64_t, 3>& o) {
        const double v = x.LoadFloat(o[0]);
        const double r = backward
                             ? g.LoadFloat(o[1]) * sdk::UnaryDerivative<double>(
                                                       kind, v, alpha, beta)
                             : sdk::ApplyUnary<double>(kind, v, alpha, beta);
        out.StoreFloat(o[2], static_cast<float>(r));
      });
  return sdk::OkStatus();
}

sdk::Status Compare(const sdk::KernelCall& call) {
  MIXRT_ASSIGN_OR_RETURN(auto attrs, sdk::CompareAttrs(call));
  const auto kind = static_cast<MixrtCompareKind>(attrs.kind);
  const TensorRef& x = call.inputs[0];
  const TensorRef& y = call.inputs[1];
  const TensorRef& out = call.outputs[0];
  const bool floating = sdk::IsFloatingDtype(x.dtype());
  sdk::ForEachElement<3>(
      out.ndim(), out.shape(), {x.strides(), y.strides(), out.strides()},
      [&](const std::array<int64_t, 3>& o) {
        const bool r = floating
                           ? sdk::ApplyCompare<double>(kind, x.LoadFloat(o[0]),
                                                       y.LoadFloat(o[1]))
                           : sdk::ApplyCompare<int64_t>(kind, x.LoadInt(o[0]),
                                                        y.LoadInt(o[1]));
        out.StoreInt(o[2], r ? 1 : 0);
      });
  return sdk::OkStatus();
}

sdk::Status Where(const sdk::KernelCall& call) {
  const TensorRef& c = call.inputs[0];
  const TensorRef& x = call.inputs[1];
  const TensorRef& y = call.inputs[2];
  const TensorRef& out = call.outputs[0];
  MIXRT_RETURN_IF_ERROR(sdk::CheckWhereDtypes(call));
  const bool floating = sdk::IsFloatingDtype(out.dtype());
  sdk::ForEachElement<4>(
      out.ndim(), out.shape(),
      {c.strides(), x.strides(), y.strides(), out.strides()},
      [&](const std::array<int64_t, 4>& o) {
        const bool pick_x = c.LoadInt(o[0]) != 0;
        if (floating) {
          out.StoreFloat(o[3], pick_x ? x.LoadFloat(o[1]) : y.LoadFloat(o[2]));
        } else {
          out.StoreInt(o[3], pick_x ? x.LoadInt(o[1]) : y.LoadInt(o[2]));
        }
      });
  return sdk::OkStatus();
}

sdk::Status UnaryForward(const sdk::KernelCall& call) {
  return Unary(call, /*backward=*/false);
}

sdk::Status UnaryBackward(const sdk::KernelCall& call) {
  return Unary(call, /*backward=*/true);
}

}  // namespace

std::vector<sdk::OpTable::Row> PointwiseOps() {
  return {
      {MIXRT_OP_BINARY, WithArity<2, Binary, kSameShapes>},
      {MIXRT_OP_UNARY, WithArity<1, UnaryForward, kSameShapes>},
      {MIXRT_OP_UNARY_BACKWARD, WithArity<2, UnaryBackward, kSameShapes>},
      {MIXRT_OP_COMPARE, WithArity<2, Compare, kSameShapes>},
      {MIXRT_OP_WHERE, WithArity<3, Where, kSameShapes>},
  };
}

}  // namespace mixrt::reference
