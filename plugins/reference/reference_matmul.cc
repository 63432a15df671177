// matmul with bias, activation and accumulation, batched.
#include <array>
#include <vector>

#include "absl/strings/str_cat.h"
#include "mixrt/status_macros.h"
#include "plugins/reference/reference_kernels.h"
#include "plugins/sdk/pointwise_math.h"
#include "plugins/sdk/tensor_ref.h"

namespace mixrt::reference {
namespace {

using sdk::TensorRef;

double Activate(MixrtActivation act, double v) {
  switch (act) {
    case MIXRT_ACTIVATION_RELU:
      return sdk::ApplyUnary<double>(MIXRT_UNARY_RELU, v, 0, 0);
    case MIXRT_ACTIVATION_GELU:
      return sdk::ApplyUnary<double>(MIXRT_UNARY_GELU, v, 0, 0);
    case MIXRT_ACTIVATION_GELU_TANH:
      return sdk::ApplyUnary<double>(MIXRT_UNARY_GELU_TANH, v, 0, 0);
    default:
      return v;
  }
}

}  // namespace

namespace {

sdk::Status Matmul(const sdk::KernelCall& call) {
  MIXRT_RETURN_IF_ERROR(ExpectArity(call, 2, 3, 1));
  MIXRT_ASSIGN_OR_RETURN(auto attrs, call.GetAttrs<MixrtMatmulAttrs>());
  const TensorRef& a = call.inputs[0];
  const TensorRef& b = call.inputs[1];
  const TensorRef& out = call.outputs[0];
  const int nd = out.ndim();
  if (nd < 2 || a.ndim() != nd || b.ndim() != nd) {
    return sdk::InvalidArgumentError(
        "matmul needs inputs and output of one rank >= 2");
  }
  const int64_t m = a.dim(nd - 2), k = a.dim(nd - 1), n = b.dim(nd - 1);
  if (b.dim(nd - 2) != k || out.dim(nd - 2) != m || out.dim(nd - 1) != n) {
    return sdk::InvalidArgumentError(absl::StrCat(
        "matmul shapes do not chain: [", m, ", ", k, "] @ [", b.dim(nd - 2),
        ", ", n, "] -> [", out.dim(nd - 2), ", ", out.dim(nd - 1), "]"));
  }
  for (int d = 0; d < nd - 2; ++d) {
    if (a.dim(d) != out.dim(d) || b.dim(d) != out.dim(d)) {
      return sdk::InvalidArgumentError("matmul batch dims differ");
    }
  }
  if (a.dtype() != b.dtype() || !sdk::IsFloatingDtype(a.dtype()) ||
      (out.dtype() != a.dtype() && out.dtype() != MIXRT_DTYPE_F32)) {
    return sdk::InvalidArgumentError(
        "matmul needs floating inputs of one dtype and an output of that "
        "dtype or f32");
  }
  const bool has_bias = call.inputs.size() == 3;
  if (has_bias && (call.inputs[2].ndim() != 1 || call.inputs[2].dim(0) != n)) {
    return sdk::InvalidArgumentError(
        absl::StrCat("matmul bias must have shape [", n, "]"));
  }
  const auto act = static_cast<MixrtActivation>(attrs->activation);
  const double beta = attrs->beta;
  // Walk the batch dims with the last two dims collapsed to one element.
  std::array<int64_t, MIXRT_MAX_DIMS> batch_shape{};
  for (int d = 0; d < nd - 2; ++d) batch_shape[d] = out.dim(d);
  sdk::ForEachElement<3>(
      nd - 2, batch_shape.data(), {a.strides(), b.strides(), out.strides()},
      [&](const std::array<int64_t, 3>& base) {
        for (int64_t i = 0; i < m; ++i) {
          for (int64_t j = 0; j < n; ++j) {
            double sum = 0;
            for (int64_t p = 0; p < k; ++p) {
              sum +=
                  static_cast<double>(a.LoadFloat(
                      base[0] + i * a.stride(nd - 2) + p * a.stride(nd - 1))) *
                  b.LoadFloat(base[1] + p * b.stride(nd - 2) +
                              j * b.stride(nd - 1));
            }
            if (has_bias) {
              sum += call.inputs[2].LoadFloat(j * call.inputs[2].stride(0));
            }
            const int64_t o =
                base[2] + i * out.stride(nd - 2) + j * out.stride(nd - 1);
            double v = Activate(act, sum);
            if (beta != 0) v += beta * out.LoadFloat(o);
            out.StoreFloat(o, static_cast<float>(v));
          }
        }
      });
  return sdk::OkStatus();
}

}  // namespace

std::vector<sdk::OpTable::Row> MatmulOps() {
  return {
      {MIXRT_OP_MATMUL, Matmul},
  };
}

}  // namespace mixrt::reference
