// Grad-scaler and fused optimizer kernels' per-element work. Every scalar the
// step depends on (inv_scale, found_inf, grad_scale, the AdamW step count,
// the scale and growth tracker) is read from device memory inside the
// kernel: a training step never waits for the device to learn whether it
// overflowed, as in torch's _amp_foreach_non_finite_check_and_unscale_ and
// _amp_update_scale_.
#ifndef MIXRT_BACKENDS_GPU_OPTIMIZER_FUNCTORS_H_
#define MIXRT_BACKENDS_GPU_OPTIMIZER_FUNCTORS_H_

#include <cmath>
#include <cstdint>

#include "backends/gpu/device_tensor.h"
#include "backends/gpu/multi_tensor_plan.h"
#include "plugins/sdk/optimizer_math.h"

namespace mixrt::gpu {

// x - x is 0 for every finite x and NaN for inf and NaN; unlike isfinite it
// needs no host/device overload (no -ffast-math anywhere in this build).
MIXRT_HOST_DEVICE inline bool IsFinite(float x) { return x - x == 0.0f; }

// One block's share of a multi-tensor unscale: chunk `block` of the launch.
// Elements are checked before scaling (an inf times 0 would hide it).
struct UnscaleChunkFunctor {
  MultiTensorLaunch launch;
  const float* inv_scale;
  float* found_inf;
  MIXRT_HOST_DEVICE void operator()(int block, int thread, int threads) const {
    const MultiTensorBlock& b = launch.blocks[block];
    const DeviceTensor t = launch.Tensor(b.tensor);
    const float s = *inv_scale;
    if (!IsFinite(s)) {  // An overflow too: skip, change nothing.
      *found_inf = 1.0f;
      return;
    }
    const int64_t end = b.start + b.count;
    bool found = false;
    for (int64_t i = b.start + thread; i < end; i += threads) {
      const float v = t.LoadFloat(i);
      found = found || !IsFinite(v);
      t.StoreFloat(i, v * s);
    }
    // Every writer stores the same value, so the race is benign.
    if (found) *found_inf = 1.0f;
  }
};

// torch._amp_update_scale_, on one thread.
struct UpdateScaleFunctor {
  MixrtUpdateScaleAttrs attrs;
  const float* found_inf;
  float* scale;
  int32_t* growth_tracker;
  MIXRT_HOST_DEVICE void operator()(int64_t) const {
    sdk::UpdateScale(attrs, *found_inf, scale, growth_tracker);
  }
};

// The optional grad_scale / found_inf inputs of an optimizer step, as device
// pointers (null when absent).
struct StepGuards {
  const float* grad_scale = nullptr;
  const float* found_inf = nullptr;
  MIXRT_HOST_DEVICE bool Skip() const {
    return found_inf != nullptr && *found_inf != 0.0f;
  }
  MIXRT_HOST_DEVICE float InvScale() const {
    return grad_scale != nullptr ? 1.0f / *grad_scale : 1.0f;
  }
};

struct SgdFunctor {
  DeviceTensor param;
  DeviceTensor grad;
  DeviceTensor momentum_buffer;  // Used when attrs.momentum != 0.
  MixrtSgdAttrs attrs;
  StepGuards guards;
  MIXRT_HOST_DEVICE void operator()(int64_t i) const {
    if (guards.Skip()) return;
    const int64_t po = param.Offset(i);
    const bool momentum = attrs.momentum != 0;
    float b =
        momentum ? momentum_buffer.LoadFloat(momentum_buffer.Offset(i)) : 0.0f;
    const float g = grad.LoadFloat(grad.Offset(i)) * guards.InvScale();
    param.StoreFloat(po,
                     sdk::SgdElement<float>(attrs, param.LoadFloat(po), g, &b));
    if (momentum) momentum_buffer.StoreFloat(momentum_buffer.Offset(i), b);
  }
};

// Reads the step count before AdamWStepCountFunctor (launched after it on
// the same stream) increments it, so every element sees step + 1.
struct AdamWFunctor {
  DeviceTensor param;
  DeviceTensor grad;
  DeviceTensor exp_avg;
  DeviceTensor exp_avg_sq;
  DeviceTensor max_exp_avg_sq;  // AMSGrad only.
  const float* step;
  MixrtAdamWAttrs attrs;
  StepGuards guards;
  MIXRT_HOST_DEVICE void operator()(int64_t i) const {
    if (guards.Skip()) return;
    const int64_t po = param.Offset(i);
    const int64_t mo = exp_avg.Offset(i);
    const int64_t vo = exp_avg_sq.Offset(i);
    float m = exp_avg.LoadFloat(mo);
    float v = exp_avg_sq.LoadFloat(vo);
    const float g = grad.LoadFloat(grad.Offset(i)) * guards.InvScale();
    // The step lives on the device: each thread derives the constants.
    const sdk::AdamWStepConstants<float> c =
        sdk::AdamWConstants<float>(attrs, *step + 1.0f);
    if (attrs.flags & MIXRT_OPTIM_AMSGRAD) {
      const int64_t xo = max_exp_avg_sq.Offset(i);
      float v_max = max_exp_avg_sq.LoadFloat(xo);
      param.StoreFloat(po, sdk::AdamWElement<float>(c, param.LoadFloat(po), g,
                                                    &m, &v, &v_max));
      max_exp_avg_sq.StoreFloat(xo, v_max);
    } else {
      param.StoreFloat(
          po, sdk::AdamWElement<float>(c, param.LoadFloat(po), g, &m, &v));
    }
    exp_avg.StoreFloat(mo, m);
    exp_avg_sq.StoreFloat(vo, v);
  }
};

struct AdamWStepCountFunctor {
  float* step;
  StepGuards guards;
  MIXRT_HOST_DEVICE void operator()(int64_t) const {
    if (!guards.Skip()) *step += 1.0f;
  }
};

}  // namespace mixrt::gpu

#endif  // MIXRT_BACKENDS_GPU_OPTIMIZER_FUNCTORS_H_
