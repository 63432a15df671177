// Grad-scaler kernels and fused optimizer steps.
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "backends/gpu/gpu_ops.h"
#include "backends/gpu/multi_tensor_plan.h"
#include "mixrt/status_macros.h"
#include "plugins/sdk/call_decoders.h"

namespace mixrt::gpu {
namespace {

const float* F32Scalar(const sdk::TensorRef& t) {
  return static_cast<const float*>(t.data());
}

absl::Status Unscale(GpuDevice& device, const sdk::KernelCall& call) {
  if (call.inputs.size() != 1 || call.outputs.empty()) {
    return absl::InvalidArgumentError(
        "non_finite_check_and_unscale takes (inv_scale) and (found_inf, "
        "grads...)");
  }
  MIXRT_RETURN_IF_ERROR(
      sdk::ExpectF32Scalar(call, call.inputs[0], "inv_scale"));
  MIXRT_RETURN_IF_ERROR(
      sdk::ExpectF32Scalar(call, call.outputs[0], "found_inf"));
  std::vector<MultiTensorInput> grads;
  for (size_t t = 1; t < call.outputs.size(); ++t) {
    const sdk::TensorRef& g = call.outputs[t];
    if (!IsFloating(g.dtype()) || !g.is_contiguous()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "gradient ", t - 1, " must be a contiguous floating tensor"));
    }
    grads.push_back({g.data(), static_cast<uint32_t>(g.dtype()), g.numel()});
  }
  for (const MultiTensorLaunch& launch : PlanMultiTensorLaunches(grads)) {
    const UnscaleChunkFunctor f{launch, F32Scalar(call.inputs[0]),
                                static_cast<float*>(call.outputs[0].data())};
    MIXRT_RETURN_IF_ERROR(
        Launched(LaunchUnscale(device.ctx, f), "non_finite_check_and_unscale"));
  }
  return absl::OkStatus();
}

absl::Status UpdateScale(GpuDevice& device, const sdk::KernelCall& call) {
  MIXRT_RETURN_IF_ERROR(ExpectArity(call, 1, 1, 2));
  MIXRT_ASSIGN_OR_RETURN(auto attrs, call.GetAttrs<MixrtUpdateScaleAttrs>());
  if (call.outputs[1].dtype() != MIXRT_DTYPE_I32) {
    return absl::InvalidArgumentError("update_scale: growth tracker is i32");
  }
  const UpdateScaleFunctor f{*attrs, F32Scalar(call.inputs[0]),
                             static_cast<float*>(call.outputs[0].data()),
                             static_cast<int32_t*>(call.outputs[1].data())};
  return Launched(LaunchElementwise(device.ctx, f, 1), "update_scale");
}

StepGuards Guards(const sdk::OptimizerStepCall& step) {
  StepGuards guards;
  if (step.grad_scale != nullptr)
    guards.grad_scale = F32Scalar(*step.grad_scale);
  if (step.found_inf != nullptr) guards.found_inf = F32Scalar(*step.found_inf);
  return guards;
}

absl::Status Sgd(GpuDevice& device, const sdk::KernelCall& call) {
  MIXRT_ASSIGN_OR_RETURN(auto attrs, call.GetAttrs<MixrtSgdAttrs>());
  const MixrtSgdAttrs a = *attrs;
  MIXRT_ASSIGN_OR_RETURN(
      sdk::OptimizerStepCall decoded,
      sdk::DecodeOptimizerStep(call, a.flags, a.momentum ? 2 : 1));
  const StepGuards guards = Guards(decoded);
  const SgdFunctor f{Tensor(call.outputs[0]), Tensor(call.inputs[0]),
                     a.momentum ? Tensor(call.outputs[1]) : DeviceTensor(), a,
                     guards};
  return Launched(LaunchElementwise(device.ctx, f, f.param.numel), "sgd_step");
}

absl::Status AdamW(GpuDevice& device, const sdk::KernelCall& call) {
  MIXRT_ASSIGN_OR_RETURN(auto attrs, call.GetAttrs<MixrtAdamWAttrs>());
  const MixrtAdamWAttrs a = *attrs;
  MIXRT_ASSIGN_OR_RETURN(
      sdk::OptimizerStepCall decoded,
      sdk::DecodeOptimizerStep(call, a.flags, sdk::AdamWOutputs(a.flags)));
  const StepGuards guards = Guards(decoded);
  MIXRT_RETURN_IF_ERROR(sdk::ExpectF32Scalar(call, call.outputs[3], "step"));
  auto* step = static_cast<float*>(call.outputs[3].data());
  const bool amsgrad = (a.flags & MIXRT_OPTIM_AMSGRAD) != 0;
  const AdamWFunctor f{Tensor(call.outputs[0]),
                       Tensor(call.inputs[0]),
                       Tensor(call.outputs[1]),
                       Tensor(call.outputs[2]),
                       amsgrad ? Tensor(call.outputs[4]) : DeviceTensor(),
                       step,
                       a,
                       guards};
  MIXRT_RETURN_IF_ERROR(
      Launched(LaunchElementwise(device.ctx, f, f.param.numel), "adamw_step"));
  // After the elements on the same stream: they all read the old count.
  return Launched(
      LaunchElementwise(device.ctx, AdamWStepCountFunctor{step, guards}, 1),
      "adamw_step (count)");
}

}  // namespace

absl::Status RunOptimizer(GpuDevice& device, const sdk::KernelCall& call) {
  switch (call.op) {
    case MIXRT_OP_NON_FINITE_CHECK_AND_UNSCALE:
      return Unscale(device, call);
    case MIXRT_OP_UPDATE_SCALE:
      return UpdateScale(device, call);
    case MIXRT_OP_SGD_STEP:
      return Sgd(device, call);
    case MIXRT_OP_MULTI_TENSOR_SGD_STEP:
      return sdk::RunEachSgdStep(
          call, [&](const sdk::KernelCall& step) { return Sgd(device, step); });
    default:
      return AdamW(device, call);
  }
}

}  // namespace mixrt::gpu
