// Per-element math of the pointwise ops in plugin_api.h, written once as
// templates over the compute type (float in fast kernels, double in the
// reference plugin) so every backend implements the same definitions. Marked
// for host and device so CUDA/HIP kernels can use them unchanged. The ops a
// fused loop runs take their math from loop_elements.h, which generated
// loops embed.
#ifndef MIXRT_PLUGINS_SDK_POINTWISE_MATH_H_
#define MIXRT_PLUGINS_SDK_POINTWISE_MATH_H_

#include <cmath>
#include <cstdint>

#include "mixrt/host_device.h"
#include "mixrt/plugin_api.h"
#include "plugins/sdk/loop_elements.h"

namespace mixrt::sdk {

template <typename T>
MIXRT_HOST_DEVICE inline T Sigmoid(T x) {
  return T(1) / (T(1) + std::exp(-x));
}

// sqrt(2 / pi) and the tanh-GELU cubic coefficient.
template <typename T>
MIXRT_HOST_DEVICE inline T GeluTanhInner(T x) {
  return T(0.7978845608028654) * (x + T(0.044715) * x * x * x);
}

template <typename T>
MIXRT_HOST_DEVICE inline T ApplyBinary(MixrtBinaryKind kind, T x, T y) {
  switch (kind) {
    case MIXRT_BINARY_ADD:
      return element::mx_add(x, y);
    case MIXRT_BINARY_SUB:
      return element::mx_sub(x, y);
    case MIXRT_BINARY_MUL:
      return element::mx_mul(x, y);
    case MIXRT_BINARY_DIV:
      return element::mx_div(x, y);
    case MIXRT_BINARY_POW:
      return element::mx_pow(x, y);
    case MIXRT_BINARY_MAXIMUM:
      return element::mx_maximum(x, y);
    case MIXRT_BINARY_MINIMUM:
      return element::mx_minimum(x, y);
    default:
      return T(0);
  }
}

template <typename T>
MIXRT_HOST_DEVICE inline T ApplyUnary(MixrtUnaryKind kind, T x, T alpha,
                                      T beta) {
  switch (kind) {
    case MIXRT_UNARY_NEG:
      return element::mx_neg(x);
    case MIXRT_UNARY_ABS:
      return element::mx_abs(x);
    case MIXRT_UNARY_RELU:
      return element::mx_relu(x);
    case MIXRT_UNARY_LEAKY_RELU:
      return element::mx_leaky_relu(x, alpha);
    // 1 + tanh(u) = 2 sigmoid(2u) avoids the cancellation that costs f32
    // most of its digits for x < -2 (as erfc does in mx_gelu).
    case MIXRT_UNARY_GELU:
      return element::mx_gelu(x);
    case MIXRT_UNARY_GELU_TANH:
      return x * Sigmoid(T(2) * GeluTanhInner(x));
    case MIXRT_UNARY_SILU:
      return x * Sigmoid(x);
    case MIXRT_UNARY_SIGMOID:
      return Sigmoid(x);
    case MIXRT_UNARY_TANH:
      return std::tanh(x);
    case MIXRT_UNARY_EXP:
      return std::exp(x);
    case MIXRT_UNARY_LOG:
      return std::log(x);
    case MIXRT_UNARY_LOG1P:
      return std::log1p(x);
    case MIXRT_UNARY_SQRT:
      return std::sqrt(x);
    case MIXRT_UNARY_RSQRT:
      return T(1) / std::sqrt(x);
    case MIXRT_UNARY_CLAMP:
      return element::mx_clamp(x, alpha, beta);
    case MIXRT_UNARY_POW_SCALAR:
      return std::pow(x, alpha);
    case MIXRT_UNARY_SCALE:
      return alpha * x + beta;
    default:
      return T(0);
  }
}

// d f(x) / dx for ApplyUnary. At kinks (relu and clamp at their thresholds,
// abs at 0) the gradient follows PyTorch: relu'(0) = 0, abs'(0) = 0, clamp
// passes the gradient at the bounds.
template <typename T>
MIXRT_HOST_DEVICE inline T UnaryDerivative(MixrtUnaryKind kind, T x, T alpha,
                                           T beta) {
  switch (kind) {
    case MIXRT_UNARY_NEG:
      return element::mx_neg_derivative(x);
    case MIXRT_UNARY_ABS:
      return element::mx_abs_derivative(x);
    case MIXRT_UNARY_RELU:
      return element::mx_relu_derivative(x);
    case MIXRT_UNARY_LEAKY_RELU:
      return element::mx_leaky_relu_derivative(x, alpha);
    case MIXRT_UNARY_GELU: {
      const T cdf = T(0.5) * std::erfc(-x * T(0.7071067811865476));
      const T pdf = std::exp(T(-0.5) * x * x) * T(0.3989422804014327);
      return cdf + x * pdf;
    }
    case MIXRT_UNARY_GELU_TANH: {
      // With s = sigmoid(2u): 0.5 (1 + tanh u) = s, 1 - tanh^2 u = 4 s (1-s).
      const T s = Sigmoid(T(2) * GeluTanhInner(x));
      const T dinner =
          T(0.7978845608028654) * (T(1) + T(3) * T(0.044715) * x * x);
      return s + T(2) * x * s * (T(1) - s) * dinner;
    }
    case MIXRT_UNARY_SILU: {
      const T s = Sigmoid(x);
      return s * (T(1) + x * (T(1) - s));
    }
    case MIXRT_UNARY_SIGMOID: {
      const T s = Sigmoid(x);
      return s * (T(1) - s);
    }
    case MIXRT_UNARY_TANH: {
      const T t = std::tanh(x);
      return T(1) - t * t;
    }
    case MIXRT_UNARY_EXP:
      return std::exp(x);
    case MIXRT_UNARY_LOG:
      return T(1) / x;
    case MIXRT_UNARY_LOG1P:
      return T(1) / (T(1) + x);
    case MIXRT_UNARY_SQRT:
      return T(0.5) / std::sqrt(x);
    case MIXRT_UNARY_RSQRT:
      return T(-0.5) / (x * std::sqrt(x));
    case MIXRT_UNARY_CLAMP:
      return element::mx_clamp_derivative(x, alpha, beta);
    case MIXRT_UNARY_POW_SCALAR:
      return alpha == T(0) ? T(0) : alpha * std::pow(x, alpha - T(1));
    case MIXRT_UNARY_SCALE:
      return alpha;
    default:
      return T(0);
  }
}

// Integer binary ops: two's-complement wrap (computed unsigned, so without
// undefined behaviour); division truncates, INT64_MIN / -1 wraps; pow takes
// a non-negative exponent. Callers reject zero divisors and negative
// exponents first.
MIXRT_HOST_DEVICE inline int64_t ApplyIntBinary(MixrtBinaryKind kind, int64_t x,
                                                int64_t y) {
  const auto ux = static_cast<uint64_t>(x);
  const auto uy = static_cast<uint64_t>(y);
  switch (kind) {
    case MIXRT_BINARY_ADD:
      return static_cast<int64_t>(ux + uy);
    case MIXRT_BINARY_SUB:
      return static_cast<int64_t>(ux - uy);
    case MIXRT_BINARY_MUL:
      return static_cast<int64_t>(ux * uy);
    case MIXRT_BINARY_DIV:
      return (x == INT64_MIN && y == -1) ? INT64_MIN : x / y;
    case MIXRT_BINARY_MAXIMUM:
      return x > y ? x : y;
    case MIXRT_BINARY_MINIMUM:
      return x < y ? x : y;
    default: {
      uint64_t r = 1;
      for (int64_t i = 0; i < y; ++i) r *= ux;
      return static_cast<int64_t>(r);
    }
  }
}

template <typename T>
MIXRT_HOST_DEVICE inline bool ApplyCompare(MixrtCompareKind kind, T x, T y) {
  switch (kind) {
    case MIXRT_COMPARE_EQ:
      return element::mx_eq(x, y);
    case MIXRT_COMPARE_NE:
      return element::mx_ne(x, y);
    case MIXRT_COMPARE_LT:
      return element::mx_lt(x, y);
    case MIXRT_COMPARE_LE:
      return element::mx_le(x, y);
    case MIXRT_COMPARE_GT:
      return element::mx_gt(x, y);
    case MIXRT_COMPARE_GE:
      return element::mx_ge(x, y);
    default:
      return false;
  }
}

}  // namespace mixrt::sdk

#endif  // MIXRT_PLUGINS_SDK_POINTWISE_MATH_H_
