// The element functions of the ops a fused loop runs, written once: the
// op-by-op kernels and the reference plugin reach them through
// pointwise_math.h, the CPU plugin's loop interpreter calls them, and the
// loop emitter prints calls to them. The build embeds this very file in
// every generated loop's prelude (loop_prelude_text, as Inductor embeds
// cpp_prefix.h), so generated code computes what the kernels compute with
// nothing restated in string literals.
//
// It compiles in three places: the plugin build (host and CUDA/HIP device
// code), generated host source (the system compiler) and NVRTC, the last
// two including nothing. So with MIXRT_LOOP_PRELUDE defined it includes
// nothing and takes MIXRT_ELEMENT_FN and the libm functions it needs (mx_fabs,
// mx_erfc, mx_pow) from the prelude.
#ifndef MIXRT_PLUGINS_SDK_LOOP_ELEMENTS_H_
#define MIXRT_PLUGINS_SDK_LOOP_ELEMENTS_H_

#ifndef MIXRT_LOOP_PRELUDE
#include <cmath>

#include "mixrt/host_device.h"
#define MIXRT_ELEMENT_FN MIXRT_HOST_DEVICE inline

namespace mixrt {
namespace sdk {
namespace element {
template <typename T>
MIXRT_ELEMENT_FN T mx_fabs(T x) {
  return std::fabs(x);
}
template <typename T>
MIXRT_ELEMENT_FN T mx_erfc(T x) {
  return std::erfc(x);
}
template <typename T>
MIXRT_ELEMENT_FN T mx_pow(T x, T y) {
  return std::pow(x, y);
}
}  // namespace element
}  // namespace sdk
}  // namespace mixrt
#endif

namespace mixrt {
namespace sdk {
namespace element {

template <typename T>
MIXRT_ELEMENT_FN T mx_add(T x, T y) {
  return x + y;
}
template <typename T>
MIXRT_ELEMENT_FN T mx_sub(T x, T y) {
  return x - y;
}
template <typename T>
MIXRT_ELEMENT_FN T mx_mul(T x, T y) {
  return x * y;
}
template <typename T>
MIXRT_ELEMENT_FN T mx_div(T x, T y) {
  return x / y;
}
// NaN in either propagates (x + y), as torch.maximum and torch.minimum.
template <typename T>
MIXRT_ELEMENT_FN T mx_maximum(T x, T y) {
  return (x != x || y != y) ? x + y : (x > y ? x : y);
}
template <typename T>
MIXRT_ELEMENT_FN T mx_minimum(T x, T y) {
  return (x != x || y != y) ? x + y : (x < y ? x : y);
}

template <typename T>
MIXRT_ELEMENT_FN T mx_neg(T x) {
  return -x;
}
template <typename T>
MIXRT_ELEMENT_FN T mx_abs(T x) {
  return mx_fabs(x);
}
// NaN stays NaN (a comparison alone would make it 0).
template <typename T>
MIXRT_ELEMENT_FN T mx_relu(T x) {
  return x > T(0) ? x : (x != x ? x : T(0));
}
template <typename T>
MIXRT_ELEMENT_FN T mx_leaky_relu(T x, T slope) {
  return x > T(0) ? x : x * slope;
}
// 1 + erf(z) = erfc(-z) avoids the cancellation that costs f32 most of its
// digits for x < -2.
template <typename T>
MIXRT_ELEMENT_FN T mx_gelu(T x) {
  return T(0.5) * x * mx_erfc(-x * T(0.7071067811865476));
}
// A NaN bound is no bound.
template <typename T>
MIXRT_ELEMENT_FN T mx_clamp(T x, T low, T high) {
  T r = x;
  if (low == low && r < low) r = low;
  if (high == high && r > high) r = high;
  return r;
}

// Derivatives; at kinks they follow PyTorch: relu'(0) = 0, abs'(0) = 0,
// clamp passes the gradient at its bounds.
template <typename T>
MIXRT_ELEMENT_FN T mx_neg_derivative(T) {
  return T(-1);
}
template <typename T>
MIXRT_ELEMENT_FN T mx_abs_derivative(T x) {
  return x > T(0) ? T(1) : (x < T(0) ? T(-1) : T(0));
}
template <typename T>
MIXRT_ELEMENT_FN T mx_relu_derivative(T x) {
  return x > T(0) ? T(1) : T(0);
}
template <typename T>
MIXRT_ELEMENT_FN T mx_leaky_relu_derivative(T x, T slope) {
  return x > T(0) ? T(1) : slope;
}
template <typename T>
MIXRT_ELEMENT_FN T mx_clamp_derivative(T x, T low, T high) {
  return ((low == low && x < low) || (high == high && x > high)) ? T(0) : T(1);
}

template <typename T>
MIXRT_ELEMENT_FN bool mx_eq(T x, T y) {
  return x == y;
}
template <typename T>
MIXRT_ELEMENT_FN bool mx_ne(T x, T y) {
  return x != y;
}
template <typename T>
MIXRT_ELEMENT_FN bool mx_lt(T x, T y) {
  return x < y;
}
template <typename T>
MIXRT_ELEMENT_FN bool mx_le(T x, T y) {
  return x <= y;
}
template <typename T>
MIXRT_ELEMENT_FN bool mx_gt(T x, T y) {
  return x > y;
}
template <typename T>
MIXRT_ELEMENT_FN bool mx_ge(T x, T y) {
  return x >= y;
}

// A bool held as a float (1 or 0), as loops carry bool values.
MIXRT_ELEMENT_FN float mx_bool_as_float(bool b) { return b ? 1.0f : 0.0f; }
MIXRT_ELEMENT_FN float mx_where(float condition, float x, float y) {
  return condition != 0.0f ? x : y;
}
MIXRT_ELEMENT_FN float mx_to_bool(float x) { return x != 0.0f ? 1.0f : 0.0f; }

}  // namespace element
}  // namespace sdk
}  // namespace mixrt

#endif  // MIXRT_PLUGINS_SDK_LOOP_ELEMENTS_H_
