#include "plugins/reference/reference_kernels.h"

#include <array>
#include <cstdint>

#include "absl/strings/str_cat.h"
#include "plugins/sdk/philox.h"
#include "plugins/sdk/tensor_ref.h"

namespace mixrt::reference {
namespace {

using sdk::TensorRef;

absl::Status ExpectArity(const sdk::KernelCall& call, size_t inputs,
                         size_t outputs) {
  if (call.inputs.size() != inputs || call.outputs.size() != outputs) {
    return absl::InvalidArgumentError(absl::StrCat(
        "op ", call.op, " takes ", inputs, " input(s) and ", outputs,
        " output(s); got ", call.inputs.size(), " and ", call.outputs.size()));
  }
  for (const TensorRef& in : call.inputs) {
    if (!in.same_shape(call.outputs[0])) {
      return absl::InvalidArgumentError(absl::StrCat(
          "op ", call.op, ": input shape differs from the output shape"));
    }
  }
  return absl::OkStatus();
}

// out[i] = f(i) over the flattened output.
template <typename Fn>
void Generate(const TensorRef& out, Fn&& f) {
  int64_t i = 0;
  sdk::ForEachElement<1>(
      out.ndim(), out.shape(), {out.strides()},
      [&](const std::array<int64_t, 1>& o) { out.StoreFloat(o[0], f(i++)); });
}

absl::Status Fill(const sdk::KernelCall& call) {
  absl::Status ok = ExpectArity(call, 0, 1);
  if (!ok.ok()) return ok;
  auto attrs = call.GetAttrs<MixrtScalarAttrs>();
  if (!attrs.ok()) return attrs.status();
  const TensorRef& out = call.outputs[0];
  const double value = (*attrs)->value;
  if (!sdk::IsFloatingDtype(out.dtype())) {
    sdk::ForEachElement<1>(out.ndim(), out.shape(), {out.strides()},
                           [&](const std::array<int64_t, 1>& o) {
                             out.StoreInt(o[0], static_cast<int64_t>(value));
                           });
    return absl::OkStatus();
  }
  Generate(out, [&](int64_t) { return static_cast<float>(value); });
  return absl::OkStatus();
}

absl::Status Copy(const sdk::KernelCall& call) {
  absl::Status ok = ExpectArity(call, 1, 1);
  if (!ok.ok()) return ok;
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
  return absl::OkStatus();
}

absl::Status Arange(const sdk::KernelCall& call) {
  absl::Status ok = ExpectArity(call, 0, 1);
  if (!ok.ok()) return ok;
  auto attrs = call.GetAttrs<MixrtArangeAttrs>();
  if (!attrs.ok()) return attrs.status();
  const TensorRef& out = call.outputs[0];
  const double start = (*attrs)->start;
  const double step = (*attrs)->step;
  int64_t i = 0;
  sdk::ForEachElement<1>(out.ndim(), out.shape(), {out.strides()},
                         [&](const std::array<int64_t, 1>& o) {
                           const double v =
                               start + static_cast<double>(i++) * step;
                           if (sdk::IsFloatingDtype(out.dtype())) {
                             out.StoreFloat(o[0], static_cast<float>(v));
                           } else {
                             out.StoreInt(o[0], static_cast<int64_t>(v));
                           }
                         });
  return absl::OkStatus();
}

absl::Status Random(const sdk::KernelCall& call) {
  absl::Status ok = ExpectArity(call, 0, 1);
  if (!ok.ok()) return ok;
  auto attrs = call.GetAttrs<MixrtRandomAttrs>();
  if (!attrs.ok()) return attrs.status();
  const TensorRef& out = call.outputs[0];
  if (!sdk::IsFloatingDtype(out.dtype())) {
    return absl::InvalidArgumentError("random ops need a floating output");
  }
  const MixrtRandomAttrs a = **attrs;
  const bool normal = call.op == MIXRT_OP_RANDOM_NORMAL;
  Generate(out, [&](int64_t i) {
    const uint64_t index = static_cast<uint64_t>(i);
    return static_cast<float>(
        normal ? sdk::PhiloxNormal(a.seed, a.offset, index, a.a, a.b)
               : sdk::PhiloxUniform(a.seed, a.offset, index, a.a, a.b));
  });
  return absl::OkStatus();
}

float ApplyFloat(MixrtOp op, float x, float y) {
  switch (op) {
    case MIXRT_OP_ADD:
      return x + y;
    case MIXRT_OP_SUB:
      return x - y;
    case MIXRT_OP_MUL:
      return x * y;
    case MIXRT_OP_DIV:
      return x / y;
    default:
      return -x;  // MIXRT_OP_NEG
  }
}

int64_t ApplyInt(MixrtOp op, int64_t x, int64_t y) {
  // Unsigned arithmetic wraps without undefined behaviour.
  const uint64_t ux = static_cast<uint64_t>(x);
  const uint64_t uy = static_cast<uint64_t>(y);
  switch (op) {
    case MIXRT_OP_ADD:
      return static_cast<int64_t>(ux + uy);
    case MIXRT_OP_SUB:
      return static_cast<int64_t>(ux - uy);
    case MIXRT_OP_MUL:
      return static_cast<int64_t>(ux * uy);
    case MIXRT_OP_DIV:
      return (x == INT64_MIN && y == -1) ? INT64_MIN : x / y;
    default:
      return static_cast<int64_t>(0 - ux);  // MIXRT_OP_NEG
  }
}

absl::Status Pointwise(const sdk::KernelCall& call) {
  const bool unary = call.op == MIXRT_OP_NEG;
  absl::Status ok = ExpectArity(call, unary ? 1 : 2, 1);
  if (!ok.ok()) return ok;
  const TensorRef& x = call.inputs[0];
  const TensorRef& y = unary ? call.inputs[0] : call.inputs[1];
  const TensorRef& out = call.outputs[0];
  if (x.dtype() != out.dtype() || y.dtype() != out.dtype()) {
    return absl::InvalidArgumentError(
        absl::StrCat("op ", call.op, " needs one dtype for inputs and output"));
  }
  if (out.dtype() == MIXRT_DTYPE_BOOL) {
    return absl::InvalidArgumentError(
        absl::StrCat("op ", call.op, " does not take bool tensors"));
  }
  const bool is_float = sdk::IsFloatingDtype(out.dtype());
  const std::array<const int64_t*, 3> strides = {x.strides(), y.strides(),
                                                 out.strides()};
  if (!is_float && call.op == MIXRT_OP_DIV) {
    bool zero = false;
    sdk::ForEachElement<3>(
        out.ndim(), out.shape(), strides,
        [&](const std::array<int64_t, 3>& o) { zero |= y.LoadInt(o[1]) == 0; });
    if (zero) return absl::InvalidArgumentError("integer division by zero");
  }
  sdk::ForEachElement<3>(
      out.ndim(), out.shape(), strides, [&](const std::array<int64_t, 3>& o) {
        if (is_float) {
          out.StoreFloat(
              o[2], ApplyFloat(call.op, x.LoadFloat(o[0]), y.LoadFloat(o[1])));
        } else {
          out.StoreInt(o[2],
                       ApplyInt(call.op, x.LoadInt(o[0]), y.LoadInt(o[1])));
        }
      });
  return absl::OkStatus();
}

}  // namespace

absl::Status RunKernel(const sdk::KernelCall& call) {
  switch (call.op) {
    case MIXRT_OP_FILL:
      return Fill(call);
    case MIXRT_OP_COPY:
      return Copy(call);
    case MIXRT_OP_ARANGE:
      return Arange(call);
    case MIXRT_OP_RANDOM_UNIFORM:
    case MIXRT_OP_RANDOM_NORMAL:
      return Random(call);
    case MIXRT_OP_ADD:
    case MIXRT_OP_SUB:
    case MIXRT_OP_MUL:
    case MIXRT_OP_DIV:
    case MIXRT_OP_NEG:
      return Pointwise(call);
    default:
      return absl::UnimplementedError(
          absl::StrCat("the reference plugin does not implement op ", call.op));
  }
}

}  // namespace mixrt::reference
