#include "backends/gpu/matmul_call.h"

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "mixrt/matrix_layout.h"
#include "mixrt/status_macros.h"

namespace mixrt::gpu {

namespace {

bool IsTransposed(const DeviceTensor& t) {
  return IsTransposedDenseMatrix(t.ndim, t.shape, t.strides);
}

}  // namespace

absl::StatusOr<MatmulCall> ParseMatmulCall(const sdk::KernelCall& call,
                                           bool allow_transposed) {
  if (call.inputs.size() < 2 || call.inputs.size() > 3 ||
      call.outputs.size() != 1) {
    return absl::InvalidArgumentError(
        "matmul takes (a, b[, bias]) and one output");
  }
  MIXRT_ASSIGN_OR_RETURN(auto attrs, call.GetAttrs<MixrtMatmulAttrs>());
  if (attrs->activation > MIXRT_ACTIVATION_GELU_TANH) {
    return absl::UnimplementedError(absl::StrCat(
        "matmul activation ", attrs->activation, " is unknown here"));
  }
  const sdk::TensorRef& a = call.inputs[0];
  const sdk::TensorRef& b = call.inputs[1];
  const sdk::TensorRef& out = call.outputs[0];
  const int nd = a.ndim();
  if (nd < 2 || b.ndim() != nd || out.ndim() != nd) {
    return absl::InvalidArgumentError(
        "matmul operands need one rank >= 2 (the host aligns batch dims)");
  }
  MatmulCall m;
  m.m = a.dim(nd - 2);
  m.k = a.dim(nd - 1);
  m.n = b.dim(nd - 1);
  if (b.dim(nd - 2) != m.k || out.dim(nd - 2) != m.m ||
      out.dim(nd - 1) != m.n) {
    return absl::InvalidArgumentError(absl::StrCat(
        "matmul shapes do not chain: [", m.m, ", ", m.k, "] @ [", b.dim(nd - 2),
        ", ", m.n, "] -> [", out.dim(nd - 2), ", ", out.dim(nd - 1), "]"));
  }
  for (int d = 0; d < nd - 2; ++d) {
    if (a.dim(d) != out.dim(d) || b.dim(d) != out.dim(d)) {
      return absl::InvalidArgumentError(
          absl::StrCat("matmul batch dim ", d, " differs between operands"));
    }
    m.batch *= out.dim(d);
  }
  if (a.dtype() != b.dtype() || !sdk::IsFloatingDtype(a.dtype()) ||
      (out.dtype() != a.dtype() && out.dtype() != MIXRT_DTYPE_F32)) {
    return absl::InvalidArgumentError(
        "matmul needs floating a and b of one dtype and an output of that "
        "dtype or f32");
  }
  m.a = MakeDeviceTensor(*a.desc());
  m.b = MakeDeviceTensor(*b.desc());
  m.out = MakeDeviceTensor(*out.desc());
  m.a_transposed = allow_transposed && !m.a.contiguous && IsTransposed(m.a);
  m.b_transposed = allow_transposed && !m.b.contiguous && IsTransposed(m.b);
  if ((!m.a.contiguous && !m.a_transposed) ||
      (!m.b.contiguous && !m.b_transposed) || !m.out.contiguous) {
    return absl::InvalidArgumentError(
        "matmul operands must be contiguous on this device");
  }
  if (call.inputs.size() == 3) {
    const sdk::TensorRef& bias = call.inputs[2];
    if (bias.ndim() != 1 || bias.dim(0) != m.n ||
        !sdk::IsFloatingDtype(bias.dtype())) {
      return absl::InvalidArgumentError(
          absl::StrCat("matmul bias must be floating [", m.n, "]"));
    }
    m.epilogue.bias = MakeDeviceTensor(*bias.desc());
    m.epilogue.has_bias = true;
  }
  m.epilogue.activation = attrs->activation;
  m.epilogue.beta = attrs->beta;
  return m;
}

}  // namespace mixrt::gpu
