// Per-element math of the fused optimizer and grad-scaler ops in
// plugin_api.h, following torch.optim.SGD / AdamW and torch's
// _amp_update_scale_, shared by every backend.
#ifndef MIXRT_PLUGINS_SDK_OPTIMIZER_MATH_H_
#define MIXRT_PLUGINS_SDK_OPTIMIZER_MATH_H_

#include <cfloat>
#include <cmath>
#include <cstdint>

#include "mixrt/plugin_api.h"
#include "plugins/sdk/pointwise_math.h"

namespace mixrt::sdk {

// How many optional inputs (grad_scale, found_inf) follow the gradient.
MIXRT_HOST_DEVICE inline int OptimizerOptionalInputs(uint32_t flags) {
  return ((flags & MIXRT_OPTIM_HAS_GRAD_SCALE) ? 1 : 0) +
         ((flags & MIXRT_OPTIM_HAS_FOUND_INF) ? 1 : 0);
}

// The gradient with SGD's weight decay added.
template <typename T>
MIXRT_HOST_DEVICE inline T SgdDecayed(const MixrtSgdAttrs& a, T param, T grad) {
  return a.weight_decay != 0 ? grad + T(a.weight_decay) * param : grad;
}

// One SGD element. `grad` is already unscaled. Returns the new parameter;
// updates `buf` when momentum is used (without momentum the new parameter
// is param - lr * SgdDecayed(a, param, grad), a loop a compiler
// vectorizes).
template <typename T>
MIXRT_HOST_DEVICE inline T SgdElement(const MixrtSgdAttrs& a, T param, T grad,
                                      T* buf) {
  T d = SgdDecayed(a, param, grad);
  if (a.momentum != 0) {
    *buf = a.first_step ? d : T(a.momentum) * *buf + T(1 - a.dampening) * d;
    d = a.nesterov ? d + T(a.momentum) * *buf : *buf;
  }
  return param - T(a.lr) * d;
}

// The optimizer flags a plugin of this SDK knows for `op`: a bit outside
// them is refused, never ignored (an ignored MIXRT_OPTIM_AMSGRAD would step
// as plain AdamW without a word).
MIXRT_HOST_DEVICE inline uint32_t KnownOptimizerFlags(uint32_t op) {
  const uint32_t common =
      MIXRT_OPTIM_HAS_GRAD_SCALE | MIXRT_OPTIM_HAS_FOUND_INF;
  return op == MIXRT_OP_ADAMW_STEP ? common | MIXRT_OPTIM_AMSGRAD : common;
}

// An AdamW step's outputs: param, exp_avg, exp_avg_sq, step, and with
// AMSGrad max_exp_avg_sq.
MIXRT_HOST_DEVICE inline int AdamWOutputs(uint32_t flags) {
  return (flags & MIXRT_OPTIM_AMSGRAD) ? 5 : 4;
}

// What an AdamW step shares across its elements, computed once per step:
// the two pow() of the bias corrections per element were most of a CPU
// step's time.
template <typename T>
struct AdamWStepConstants {
  T decay, beta1, one_minus_beta1, beta2, one_minus_beta2;
  T sqrt_bias2, step_size, eps;
};

// At step `step` (already incremented, >= 1). The bias corrections and
// the step size in double, rounded to T once, as PyTorch's AdamW computes
// them (Python floats) before its f32 kernels take them: in f32, pow and
// the division drifted 273 ulp from a double AdamW in 5 steps at lr 0.1.
template <typename T>
MIXRT_HOST_DEVICE inline AdamWStepConstants<T> AdamWConstants(
    const MixrtAdamWAttrs& a, T step) {
  const double bias1 = 1.0 - std::pow(a.beta1, static_cast<double>(step));
  const double bias2 = 1.0 - std::pow(a.beta2, static_cast<double>(step));
  return {T(1 - a.lr * a.weight_decay),
          T(a.beta1),
          T(1 - a.beta1),
          T(a.beta2),
          T(1 - a.beta2),
          T(std::sqrt(bias2)),
          T(a.lr / bias1),
          T(a.eps)};
}

// torch.maximum: NaN when either is NaN.
template <typename T>
MIXRT_HOST_DEVICE inline T MaximumPropagatingNan(T a, T b) {
  return (a >= b || a != a) ? a : b;
}

// One AdamW element; returns the new parameter. With `max_exp_avg_sq`
// (AMSGrad) the denominator takes the running maximum of exp_avg_sq, kept
// there, as torch.optim.AdamW(amsgrad=True).
template <typename T>
MIXRT_HOST_DEVICE inline T AdamWElement(const AdamWStepConstants<T>& c, T param,
                                        T grad, T* exp_avg, T* exp_avg_sq,
                                        T* max_exp_avg_sq = nullptr) {
  param *= c.decay;
  *exp_avg = c.beta1 * *exp_avg + c.one_minus_beta1 * grad;
  *exp_avg_sq = c.beta2 * *exp_avg_sq + c.one_minus_beta2 * grad * grad;
  T second = *exp_avg_sq;
  if (max_exp_avg_sq != nullptr) {
    second = MaximumPropagatingNan(*max_exp_avg_sq, second);
    *max_exp_avg_sq = second;
  }
  const T denom = std::sqrt(second) / c.sqrt_bias2 + c.eps;
  return param - c.step_size * (*exp_avg / denom);
}

// torch._amp_update_scale_ on one scale and growth tracker.
MIXRT_HOST_DEVICE inline void UpdateScale(const MixrtUpdateScaleAttrs& a,
                                          float found_inf, float* scale,
                                          int32_t* growth_tracker) {
  // As PyTorch: the f32 scale times the double factor, rounded to f32 once.
  // Rounding the factor to f32 first drifts off PyTorch's trajectory within
  // a few updates for factors such as 0.3, 0.9 or 1.1.
  if (found_inf != 0.0f) {
    *scale = static_cast<float>(static_cast<double>(*scale) * a.backoff_factor);
    // Never back off to 0 (PyTorch does, after ~150 overflows in a row from
    // 2^16): at 0, 1/scale is inf and the next clean step would multiply
    // zero gradients by it. The smallest normal f32 keeps 1/scale finite.
    if (*scale < FLT_MIN) *scale = FLT_MIN;
    *growth_tracker = 0;
    return;
  }
  const int32_t successful = *growth_tracker + 1;
  if (successful == a.growth_interval) {
    const float grown =
        static_cast<float>(static_cast<double>(*scale) * a.growth_factor);
    // Never grow into inf: keep the scale and start counting again.
    if (std::isfinite(grown)) *scale = grown;
    *growth_tracker = 0;
  } else {
    *growth_tracker = successful;
  }
}

}  // namespace mixrt::sdk

#endif  // MIXRT_PLUGINS_SDK_OPTIMIZER_MATH_H_
