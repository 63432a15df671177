// Grad-scaler kernels and fused SGD / AdamW steps over dense f32 state.
#include "backends/cpu/kernels/cpu_optimizer.h"

#include <cmath>
#include <cstring>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "backends/cpu/kernels/float_rows.h"
#include "backends/cpu/kernels/parallel.h"
#include "mixrt/status_macros.h"
#include "plugins/sdk/call_decoders.h"
#include "plugins/sdk/optimizer_math.h"
#include "plugins/sdk/tensor_ref.h"

namespace mixrt::cpu {
namespace {

using sdk::TensorRef;

constexpr int64_t kChunk = 1024;
constexpr int64_t kGrain = 1 << 15;

absl::Status NonFiniteCheckAndUnscale(const sdk::KernelCall& call) {
  if (call.inputs.size() != 1 || call.outputs.empty()) {
    return absl::InvalidArgumentError(
        "non_finite_check_and_unscale takes (inv_scale) and (found_inf, "
        "grads...)");
  }
  const float inv_scale = call.inputs[0].LoadFloat(0);
  if (!std::isfinite(inv_scale)) {  // An overflow too: skip, change nothing.
    call.outputs[0].StoreFloat(0, 1.0f);
    return absl::OkStatus();
  }
  bool found = false;
  for (size_t k = 1; k < call.outputs.size(); ++k) {
    const TensorRef& g = call.outputs[k];
    if (!sdk::IsFloatingDtype(g.dtype())) {
      return absl::InvalidArgumentError("gradients must be floating");
    }
    int found_here = 0;
    ParallelFor(g.numel(), kGrain, [&](int64_t begin, int64_t end) {
      float buffer[kChunk];
      int local = 0;
      // An f32 gradient in place; others through f32 rows of `buffer`.
      const bool in_place = g.dtype() == MIXRT_DTYPE_F32;
      for (int64_t b = begin; b < end; b += kChunk) {
        const int64_t n = std::min(kChunk, end - b);
        float* x = in_place ? static_cast<float*>(g.data()) + b : buffer;
        if (!in_place) LoadRow(g.data(), g.dtype(), b, n, buffer);
        for (int64_t i = 0; i < n; ++i) {
          uint32_t bits;  // Exponent all ones: inf or NaN (vectorizes).
          std::memcpy(&bits, &x[i], 4);
          local |= (bits & 0x7f800000u) == 0x7f800000u;
          x[i] *= inv_scale;
        }
        if (!in_place) StoreRow(buffer, n, g.data(), g.dtype(), b);
      }
      if (local) {
#pragma omp atomic write
        found_here = 1;
      }
    });
    found |= found_here != 0;
  }
  if (found) call.outputs[0].StoreFloat(0, 1.0f);
  return absl::OkStatus();
}

absl::Status UpdateScale(const sdk::KernelCall& call) {
  if (call.inputs.size() != 1 || call.outputs.size() != 2 ||
      call.outputs[1].dtype() != MIXRT_DTYPE_I32) {
    return absl::InvalidArgumentError(
        "update_scale takes (found_inf) and (scale, growth_tracker i32)");
  }
  MIXRT_ASSIGN_OR_RETURN(auto attrs, call.GetAttrs<MixrtUpdateScaleAttrs>());
  float scale = call.outputs[0].LoadFloat(0);
  auto tracker = static_cast<int32_t>(call.outputs[1].LoadInt(0));
  sdk::UpdateScale(*attrs, call.inputs[0].LoadFloat(0), &scale, &tracker);
  call.outputs[0].StoreFloat(0, scale);
  call.outputs[1].StoreInt(0, tracker);
  return absl::OkStatus();
}

// False when found_inf says to skip; sets the gradient's multiplier.
bool Prepare(const sdk::OptimizerStepCall& step, float* inv_scale) {
  *inv_scale =
      step.grad_scale != nullptr ? 1.0f / step.grad_scale->LoadFloat(0) : 1.0f;
  return step.found_inf == nullptr || step.found_inf->LoadFloat(0) == 0.0f;
}

absl::Status Sgd(const sdk::KernelCall& call) {
  MIXRT_ASSIGN_OR_RETURN(auto attrs, call.GetAttrs<MixrtSgdAttrs>());
  const MixrtSgdAttrs a = *attrs;
  MIXRT_ASSIGN_OR_RETURN(
      sdk::OptimizerStepCall decoded,
      sdk::DecodeOptimizerStep(call, a.flags, a.momentum != 0 ? 2 : 1));
  float inv_scale;
  if (!Prepare(decoded, &inv_scale)) return absl::OkStatus();
  auto* p = static_cast<float*>(call.outputs[0].data());
  float* buf =
      a.momentum != 0 ? static_cast<float*>(call.outputs[1].data()) : nullptr;
  const TensorRef& g = *decoded.grad;
  ParallelFor(call.outputs[0].numel(), kGrain, [&](int64_t begin, int64_t end) {
    float scratch[kChunk];
    for (int64_t b = begin; b < end; b += kChunk) {
      const int64_t n = std::min(kChunk, end - b);
      const float* grad = FloatsAt(g.data(), g.dtype(), b, n, scratch);
      if (buf == nullptr) {
        // Without momentum: SgdElement's update with no buffer, a loop the
        // compiler vectorizes (SgdElement's own kept it scalar).
        const float lr = static_cast<float>(a.lr);
        for (int64_t i = 0; i < n; ++i) {
          p[b + i] -=
              lr * sdk::SgdDecayed<float>(a, p[b + i], grad[i] * inv_scale);
        }
        continue;
      }
      for (int64_t i = 0; i < n; ++i) {
        p[b + i] = sdk::SgdElement<float>(a, p[b + i], grad[i] * inv_scale,
                                          &buf[b + i]);
      }
    }
  });
  return absl::OkStatus();
}

absl::Status AdamW(const sdk::KernelCall& call) {
  MIXRT_ASSIGN_OR_RETURN(auto attrs, call.GetAttrs<MixrtAdamWAttrs>());
  const MixrtAdamWAttrs a = *attrs;
  MIXRT_ASSIGN_OR_RETURN(
      sdk::OptimizerStepCall decoded,
      sdk::DecodeOptimizerStep(call, a.flags, sdk::AdamWOutputs(a.flags)));
  float inv_scale;
  if (!Prepare(decoded, &inv_scale)) return absl::OkStatus();
  auto* step = static_cast<float*>(call.outputs[3].data());
  *step += 1.0f;
  const float t = *step;
  auto* p = static_cast<float*>(call.outputs[0].data());
  auto* m = static_cast<float*>(call.outputs[1].data());
  auto* v = static_cast<float*>(call.outputs[2].data());
  float* v_max = (a.flags & MIXRT_OPTIM_AMSGRAD)
                     ? static_cast<float*>(call.outputs[4].data())
                     : nullptr;
  const TensorRef& g = *decoded.grad;
  const sdk::AdamWStepConstants<float> c = sdk::AdamWConstants<float>(a, t);
  ParallelFor(call.outputs[0].numel(), kGrain, [&](int64_t begin, int64_t end) {
    float scratch[kChunk];
    for (int64_t b = begin; b < end; b += kChunk) {
      const int64_t n = std::min(kChunk, end - b);
      const float* grad = FloatsAt(g.data(), g.dtype(), b, n, scratch);
      if (v_max != nullptr) {
        for (int64_t i = 0; i < n; ++i) {
          p[b + i] =
              sdk::AdamWElement<float>(c, p[b + i], grad[i] * inv_scale,
                                       &m[b + i], &v[b + i], &v_max[b + i]);
        }
        continue;
      }
      for (int64_t i = 0; i < n; ++i) {
        p[b + i] = sdk::AdamWElement<float>(c, p[b + i], grad[i] * inv_scale,
                                            &m[b + i], &v[b + i]);
      }
    }
  });
  return absl::OkStatus();
}

}  // namespace

absl::Status RunNonFiniteCheckAndUnscale(const sdk::KernelCall& call) {
  return NonFiniteCheckAndUnscale(call);
}

absl::Status RunUpdateScale(const sdk::KernelCall& call) {
  return UpdateScale(call);
}

absl::Status RunSgdStep(const sdk::KernelCall& call) { return Sgd(call); }

absl::Status RunMultiTensorSgdStep(const sdk::KernelCall& call) {
  return sdk::RunEachSgdStep(call, Sgd);
}

absl::Status RunAdamWStep(const sdk::KernelCall& call) { return AdamW(call); }

}  // namespace mixrt::cpu
