// binary, unary, unary backward, compare and where on dense tensors. f32
// and bf16 go to oneDNN's eltwise and binary primitives where oneDNN has the
// op; the rest (f16, log1p, pow, maximum/minimum, compare, where) run in f32
// chunks (LoadRow -> math -> StoreRow), each op kind a separate
// instantiation so the per-element math inlines and vectorizes.
#include "backends/cpu/kernels/cpu_pointwise.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "backends/cpu/kernels/float_rows.h"
#include "backends/cpu/kernels/gelu_rows.h"
#include "backends/cpu/kernels/parallel.h"
#include "backends/cpu/onednn/onednn_pointwise.h"
#include "mixrt/status_macros.h"
#include "plugins/sdk/call_checks.h"
#include "plugins/sdk/pointwise_math.h"
#include "plugins/sdk/tensor_ref.h"

namespace mixrt::cpu {
namespace {

using sdk::TensorRef;

constexpr int64_t kChunk = 1024;
constexpr int64_t kGrain = 1 << 14;

// rows(in, n, result) over f32 chunks of the inputs: in[k][0 .. n) holds
// input k's elements, result[0 .. n) receives the output's (rows must allow
// result to be an input: an in-place op's output is its input, element for
// element). f32 tensors are read and written in place;
// other dtypes go through f32 copies (copying f32 in and out was a twentieth
// of a small MLP's compiled train step).
template <int kInputs, typename Rows>
void FloatRows(const sdk::KernelCall& call, Rows&& rows) {
  const TensorRef& out = call.outputs[0];
  ParallelFor(out.numel(), kGrain, [&](int64_t begin, int64_t end) {
    float copies[kInputs][kChunk];
    float result_copy[kChunk];
    const float* in[kInputs];
    for (int64_t b = begin; b < end; b += kChunk) {
      const int64_t n = std::min(kChunk, end - b);
      for (int k = 0; k < kInputs; ++k) {
        const TensorRef& t = call.inputs[k];
        in[k] = FloatsAt(t.data(), t.dtype(), b, n, copies[k]);
      }
      if (out.dtype() == MIXRT_DTYPE_F32) {
        rows(in, n, static_cast<float*>(out.data()) + b);
      } else {
        rows(in, n, result_copy);
        StoreRow(result_copy, n, out.data(), out.dtype(), b);
      }
    }
  });
}

// out[i] = f(in_0[i], ..., in_k[i]) over floats, for up to three inputs.
template <int kInputs, typename Fn>
void FloatMap(const sdk::KernelCall& call, Fn&& f) {
  FloatRows<kInputs>(call,
                     [&](const float* const* in, int64_t n, float* result) {
                       for (int64_t i = 0; i < n; ++i) {
                         if constexpr (kInputs == 1) result[i] = f(in[0][i]);
                         if constexpr (kInputs == 2)
                           result[i] = f(in[0][i], in[1][i]);
                         if constexpr (kInputs == 3)
                           result[i] = f(in[0][i], in[1][i], in[2][i]);
                       }
                     });
}

template <MixrtBinaryKind kKind>
void BinaryFloat(const sdk::KernelCall& call) {
  FloatMap<2>(call, [](float x, float y) {
    return sdk::ApplyBinary<float>(kKind, x, y);
  });
}

template <MixrtUnaryKind kKind>
void UnaryFloat(const sdk::KernelCall& call, float alpha, float beta,
                bool backward) {
  if constexpr (kKind == MIXRT_UNARY_GELU) {
    if (backward) {
      FloatRows<2>(call, [](const float* const* in, int64_t n, float* result) {
        GeluGradRow(in[0], in[1], n, result);
      });
    } else {
      FloatRows<1>(call, [](const float* const* in, int64_t n, float* result) {
        GeluRow(in[0], n, result);
      });
    }
    return;
  }
  if constexpr (kKind == MIXRT_UNARY_RELU) {
    if (backward) {
      // g * (x > 0), without a branch: GCC made the select a branch around
      // the multiply (it may not speculate a trapping multiply), which
      // activations of random sign mispredicted half the time (3 ns an
      // element). The factors first, then the products: two loops that
      // vectorize. An inf or NaN gradient still gives NaN at x <= 0. The
      // factors go to a buffer of their own: result may be either input.
      FloatRows<2>(call, [](const float* const* in, int64_t n, float* result) {
        float factor[kChunk];
        for (int64_t i = 0; i < n; ++i)
          factor[i] = in[1][i] > 0.0f ? 1.0f : 0.0f;
        for (int64_t i = 0; i < n; ++i) result[i] = in[0][i] * factor[i];
      });
      return;
    }
  }
  if (backward) {
    FloatMap<2>(call, [alpha, beta](float g, float x) {
      return g * sdk::UnaryDerivative<float>(kKind, x, alpha, beta);
    });
  } else {
    FloatMap<1>(call, [alpha, beta](float x) {
      return sdk::ApplyUnary<float>(kKind, x, alpha, beta);
    });
  }
}

template <size_t... kKinds>
void DispatchBinary(MixrtBinaryKind kind, const sdk::KernelCall& call,
                    std::index_sequence<kKinds...>) {
  ((kind == kKinds
        ? (BinaryFloat<static_cast<MixrtBinaryKind>(kKinds)>(call), true)
        : false) ||
   ...);
}

template <size_t... kKinds>
void DispatchUnary(MixrtUnaryKind kind, const sdk::KernelCall& call,
                   float alpha, float beta, bool backward,
                   std::index_sequence<kKinds...>) {
  ((kind == kKinds ? (UnaryFloat<static_cast<MixrtUnaryKind>(kKinds)>(
                          call, alpha, beta, backward),
                      true)
                   : false) ||
   ...);
}

// Exactly `inputs` inputs and one output, all of the output's shape.
absl::Status CheckShapes(const sdk::KernelCall& call, size_t inputs) {
  MIXRT_RETURN_IF_ERROR(sdk::ExpectArity(call, inputs, inputs, 1));
  return sdk::ExpectSameShapes(call);
}

absl::Status Binary(const sdk::KernelCall& call) {
  MIXRT_ASSIGN_OR_RETURN(auto attrs, sdk::BinaryAttrs(call));
  const auto kind = static_cast<MixrtBinaryKind>(attrs.kind);
  const TensorRef& x = call.inputs[0];
  const TensorRef& y = call.inputs[1];
  const TensorRef& out = call.outputs[0];
  if (sdk::IsFloatingDtype(out.dtype())) {
    if (!OneDnnBinary(call, kind)) {
      DispatchBinary(kind, call,
                     std::make_index_sequence<MIXRT_BINARY_COUNT>());
    }
    return absl::OkStatus();
  }
  const int64_t n = out.numel();
  for (int64_t i = 0; i < n; ++i) {
    const int64_t d = y.LoadInt(i);
    if ((kind == MIXRT_BINARY_DIV && d == 0) ||
        (kind == MIXRT_BINARY_POW && d < 0)) {
      return absl::InvalidArgumentError(
          kind == MIXRT_BINARY_DIV
              ? "integer division by zero"
              : "integers cannot be raised to negative integer powers");
    }
  }
  for (int64_t i = 0; i < n; ++i) {
    out.StoreInt(i, sdk::ApplyIntBinary(kind, x.LoadInt(i), y.LoadInt(i)));
  }
  return absl::OkStatus();
}

absl::Status Unary(const sdk::KernelCall& call, bool backward) {
  MIXRT_ASSIGN_OR_RETURN(auto attrs, sdk::UnaryAttrs(call));
  const auto kind = static_cast<MixrtUnaryKind>(attrs.kind);
  const TensorRef& out = call.outputs[0];
  if (sdk::IsFloatingDtype(out.dtype())) {
    if (!OneDnnUnary(call, attrs, backward)) {
      DispatchUnary(kind, call, static_cast<float>(attrs.alpha),
                    static_cast<float>(attrs.beta), backward,
                    std::make_index_sequence<MIXRT_UNARY_COUNT>());
    }
    return absl::OkStatus();
  }
  if (backward || out.dtype() == MIXRT_DTYPE_BOOL ||
      (kind != MIXRT_UNARY_NEG && kind != MIXRT_UNARY_ABS)) {
    return absl::InvalidArgumentError(
        absl::StrCat("unary kind ", kind, " needs a floating tensor"));
  }
  const TensorRef& x = call.inputs[0];
  for (int64_t i = 0; i < out.numel(); ++i) {
    const auto v = static_cast<uint64_t>(x.LoadInt(i));
    const bool negate = kind == MIXRT_UNARY_NEG || static_cast<int64_t>(v) < 0;
    out.StoreInt(i, static_cast<int64_t>(negate ? 0 - v : v));
  }
  return absl::OkStatus();
}

absl::Status Compare(const sdk::KernelCall& call) {
  MIXRT_ASSIGN_OR_RETURN(auto attrs, sdk::CompareAttrs(call));
  const auto kind = static_cast<MixrtCompareKind>(attrs.kind);
  const TensorRef& x = call.inputs[0];
  const TensorRef& y = call.inputs[1];
  const TensorRef& out = call.outputs[0];
  auto* result = static_cast<uint8_t*>(out.data());
  if (sdk::IsFloatingDtype(x.dtype())) {
    ParallelFor(out.numel(), kGrain, [&](int64_t begin, int64_t end) {
      float a[kChunk], b[kChunk];
      for (int64_t s = begin; s < end; s += kChunk) {
        const int64_t n = std::min(kChunk, end - s);
        LoadRow(x.data(), x.dtype(), s, n, a);
        LoadRow(y.data(), y.dtype(), s, n, b);
        for (int64_t i = 0; i < n; ++i) {
          result[s + i] = sdk::ApplyCompare<float>(kind, a[i], b[i]) ? 1 : 0;
        }
      }
    });
    return absl::OkStatus();
  }
  for (int64_t i = 0; i < out.numel(); ++i) {
    result[i] =
        sdk::ApplyCompare<int64_t>(kind, x.LoadInt(i), y.LoadInt(i)) ? 1 : 0;
  }
  return absl::OkStatus();
}

absl::Status Where(const sdk::KernelCall& call) {
  const TensorRef& c = call.inputs[0];
  const TensorRef& x = call.inputs[1];
  const TensorRef& y = call.inputs[2];
  const TensorRef& out = call.outputs[0];
  MIXRT_RETURN_IF_ERROR(sdk::CheckWhereDtypes(call));
  const auto* cond = static_cast<const uint8_t*>(c.data());
  const size_t bytes =
      out.dtype() == MIXRT_DTYPE_I64                                       ? 8
      : (out.dtype() == MIXRT_DTYPE_F32 || out.dtype() == MIXRT_DTYPE_I32) ? 4
      : out.dtype() == MIXRT_DTYPE_BOOL                                    ? 1
                                                                           : 2;
  const auto* xs = static_cast<const uint8_t*>(x.data());
  const auto* ys = static_cast<const uint8_t*>(y.data());
  auto* os = static_cast<uint8_t*>(out.data());
  ParallelFor(out.numel(), kGrain, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      std::memcpy(os + i * bytes, (cond[i] ? xs : ys) + i * bytes, bytes);
    }
  });
  return absl::OkStatus();
}

}  // namespace

absl::Status RunBinary(const sdk::KernelCall& call) {
  MIXRT_RETURN_IF_ERROR(CheckShapes(call, 2));
  return Binary(call);
}

absl::Status RunUnary(const sdk::KernelCall& call) {
  MIXRT_RETURN_IF_ERROR(CheckShapes(call, 1));
  return Unary(call, /*backward=*/false);
}

absl::Status RunUnaryBackward(const sdk::KernelCall& call) {
  MIXRT_RETURN_IF_ERROR(CheckShapes(call, 2));
  return Unary(call, /*backward=*/true);
}

absl::Status RunCompare(const sdk::KernelCall& call) {
  MIXRT_RETURN_IF_ERROR(CheckShapes(call, 2));
  return Compare(call);
}

absl::Status RunWhere(const sdk::KernelCall& call) {
  MIXRT_RETURN_IF_ERROR(CheckShapes(call, 3));
  return Where(call);
}

}  // namespace mixrt::cpu
