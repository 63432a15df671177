// Grad-scaler kernels and fused SGD / AdamW steps.
#include <array>
#include <cmath>
#include <vector>

#include "absl/strings/str_cat.h"
#include "mixrt/status_macros.h"
#include "plugins/reference/reference_kernels.h"
#include "plugins/sdk/call_decoders.h"
#include "plugins/sdk/optimizer_math.h"
#include "plugins/sdk/tensor_ref.h"

namespace mixrt::reference {
namespace {

using sdk::TensorRef;

sdk::Status NonFiniteCheckAndUnscale(const sdk::KernelCall& call) {
  if (call.inputs.size() != 1 || call.outputs.empty()) {
    return sdk::InvalidArgumentError(
        "non_finite_check_and_unscale takes (inv_scale) and (found_inf, "
        "grads...)");
  }
  const double inv_scale = call.inputs[0].LoadFloat(0);
  const TensorRef& found_inf = call.outputs[0];
  if (!std::isfinite(inv_scale)) {  // An overflow too: skip, change nothing.
    found_inf.StoreFloat(0, 1.0f);
    return sdk::OkStatus();
  }
  bool found = false;
  for (size_t t = 1; t < call.outputs.size(); ++t) {
    const TensorRef& g = call.outputs[t];
    sdk::ForEachElement<1>(g.ndim(), g.shape(), {g.strides()},
                           [&](const std::array<int64_t, 1>& o) {
                             const float v = g.LoadFloat(o[0]);
                             found |= !std::isfinite(v);
                             g.StoreFloat(o[0],
                                          static_cast<float>(v * inv_scale));
                           });
  }
  if (found) found_inf.StoreFloat(0, 1.0f);
  return sdk::OkStatus();
}

sdk::Status UpdateScale(const sdk::KernelCall& call) {
  MIXRT_RETURN_IF_ERROR(ExpectArity(call, 1, 1, 2));
  MIXRT_ASSIGN_OR_RETURN(auto attrs, call.GetAttrs<MixrtUpdateScaleAttrs>());
  if (call.outputs[1].dtype() != MIXRT_DTYPE_I32) {
    return sdk::InvalidArgumentError("update_scale: growth tracker is i32");
  }
  float scale = call.outputs[0].LoadFloat(0);
  int32_t tracker = static_cast<int32_t>(call.outputs[1].LoadInt(0));
  sdk::UpdateScale(*attrs, call.inputs[0].LoadFloat(0), &scale, &tracker);
  call.outputs[0].StoreFloat(0, scale);
  call.outputs[1].StoreInt(0, tracker);
  return sdk::OkStatus();
}

// Reads the optional grad_scale and found_inf inputs; returns false when the
// step must be skipped.
bool Prepare(const sdk::KernelCall& call, uint32_t flags, double* inv_scale) {
  size_t next = 1;
  *inv_scale = 1.0;
  if (flags & MIXRT_OPTIM_HAS_GRAD_SCALE) {
    *inv_scale = 1.0 / call.inputs[next++].LoadFloat(0);
  }
  if (flags & MIXRT_OPTIM_HAS_FOUND_INF) {
    return call.inputs[next].LoadFloat(0) == 0.0f;
  }
  return true;
}

sdk::Status Sgd(const sdk::KernelCall& call) {
  MIXRT_ASSIGN_OR_RETURN(auto attrs, call.GetAttrs<MixrtSgdAttrs>());
  const MixrtSgdAttrs a = *attrs;
  MIXRT_RETURN_IF_ERROR(
      sdk::DecodeOptimizerStep(call, a.flags, a.momentum ? 2 : 1).status());
  double inv_scale;
  if (!Prepare(call, a.flags, &inv_scale)) return sdk::OkStatus();
  const TensorRef& p = call.outputs[0];
  const TensorRef& g = call.inputs[0];
  const TensorRef& buf = call.outputs[a.momentum ? 1 : 0];
  sdk::ForEachElement<3>(
      p.ndim(), p.shape(), {p.strides(), g.strides(), buf.strides()},
      [&](const std::array<int64_t, 3>& o) {
        double b = a.momentum ? buf.LoadFloat(o[2]) : 0.0;
        const double np = sdk::SgdElement<double>(
            a, p.LoadFloat(o[0]), g.LoadFloat(o[1]) * inv_scale, &b);
        p.StoreFloat(o[0], static_cast<float>(np));
        if (a.momentum) buf.StoreFloat(o[2], static_cast<float>(b));
      });
  return sdk::OkStatus();
}

sdk::Status AdamW(const sdk::KernelCall& call) {
  MIXRT_ASSIGN_OR_RETURN(auto attrs, call.GetAttrs<MixrtAdamWAttrs>());
  const MixrtAdamWAttrs a = *attrs;
  MIXRT_RETURN_IF_ERROR(
      sdk::DecodeOptimizerStep(call, a.flags, sdk::AdamWOutputs(a.flags))
          .status());
  double inv_scale;
  if (!Prepare(call, a.flags, &inv_scale)) return sdk::OkStatus();
  const TensorRef& p = call.outputs[0];
  const TensorRef& m = call.outputs[1];
  const TensorRef& v = call.outputs[2];
  const TensorRef& step_t = call.outputs[3];
  const bool amsgrad = (a.flags & MIXRT_OPTIM_AMSGRAD) != 0;
  // Without AMSGrad, v stands in for the maximum it would keep.
  const TensorRef& v_max = call.outputs[amsgrad ? 4 : 2];
  const double step = step_t.LoadFloat(0) + 1.0;
  step_t.StoreFloat(0, static_cast<float>(step));
  const TensorRef& g = call.inputs[0];
  const sdk::AdamWStepConstants<double> c =
      sdk::AdamWConstants<double>(a, step);
  sdk::ForEachElement<5>(
      p.ndim(), p.shape(),
      {p.strides(), g.strides(), m.strides(), v.strides(), v_max.strides()},
      [&](const std::array<int64_t, 5>& o) {
        double mm = m.LoadFloat(o[2]);
        double vv = v.LoadFloat(o[3]);
        double vmax = v_max.LoadFloat(o[4]);
        const double np = sdk::AdamWElement<double>(
            c, p.LoadFloat(o[0]), g.LoadFloat(o[1]) * inv_scale, &mm, &vv,
            amsgrad ? &vmax : nullptr);
        p.StoreFloat(o[0], static_cast<float>(np));
        m.StoreFloat(o[2], static_cast<float>(mm));
        v.StoreFloat(o[3], static_cast<float>(vv));
        if (amsgrad) v_max.StoreFloat(o[4], static_cast<float>(vmax));
      });
  return sdk::OkStatus();
}

}  // namespace

std::vector<sdk::OpTable::Row> OptimizerOps() {
  return {
      {MIXRT_OP_NON_FINITE_CHECK_AND_UNSCALE, NonFiniteCheckAndUnscale},
      {MIXRT_OP_UPDATE_SCALE, UpdateScale},
      {MIXRT_OP_SGD_STEP, Sgd},
      {MIXRT_OP_MULTI_TENSOR_SGD_STEP,
       [](const sdk::KernelCall& call) {
         return sdk::RunEachSgdStep(call, Sgd);
       }},
      {MIXRT_OP_ADAMW_STEP, AdamW},
  };
}

}  // namespace mixrt::reference
