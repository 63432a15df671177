#include "core/kernels/optimizer_kernels.h"

#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "core/kernels/op_checks.h"
#include "core/tensor/kernel_launch.h"
#include "mixrt/status_macros.h"

namespace mixrt::kernels {
namespace {

// Optimizers step f32 parameters (autocast casts them per op).
absl::Status CheckMasterWeight(const Tensor& param, absl::string_view op) {
  MIXRT_RETURN_IF_ERROR(CheckDefined(param, op));
  if (param.dtype() != DType::kF32) {
    return absl::InvalidArgumentError(
        absl::StrCat(op, ": parameters must be f32 master weights, got ",
                     DTypeName(param.dtype())));
  }
  return absl::OkStatus();
}

absl::Status CheckState(const Tensor& param, const Tensor& t,
                        absl::string_view what, absl::string_view op) {
  MIXRT_RETURN_IF_ERROR(CheckSameDevice(param, t, op));
  if (t.dtype() != DType::kF32 || t.shape() != param.shape()) {
    return absl::InvalidArgumentError(
        absl::StrCat(op, ": ", what, " must be f32 with the parameter's shape ",
                     ShapeToString(param.shape()), ", got ",
                     DTypeName(t.dtype()), " ", ShapeToString(t.shape())));
  }
  return absl::OkStatus();
}

// The inputs (grad, optional scalars) and the flags saying which are there.
absl::StatusOr<std::vector<Tensor>> Inputs(const Tensor& param,
                                           const Tensor& grad,
                                           const StepScaling& scaling,
                                           absl::string_view op,
                                           uint32_t* flags) {
  MIXRT_RETURN_IF_ERROR(CheckFloating(grad, op));
  MIXRT_RETURN_IF_ERROR(CheckSameDevice(param, grad, op));
  if (grad.shape() != param.shape()) {
    return absl::InvalidArgumentError(absl::StrCat(
        op, ": gradient ", ShapeToString(grad.shape()),
        " does not match the parameter ", ShapeToString(param.shape())));
  }
  std::vector<Tensor> ins = {grad};
  *flags = 0;
  for (const auto& [t, flag, name] :
       {std::make_tuple(&scaling.grad_scale, MIXRT_OPTIM_HAS_GRAD_SCALE,
                        "grad_scale"),
        std::make_tuple(&scaling.found_inf, MIXRT_OPTIM_HAS_FOUND_INF,
                        "found_inf")}) {
    if (!t->defined()) continue;
    MIXRT_RETURN_IF_ERROR(CheckSameDevice(param, *t, op));
    if (t->numel() != 1 || t->dtype() != DType::kF32) {
      return absl::InvalidArgumentError(
          absl::StrCat(op, ": ", name, " must be a one-element f32 tensor"));
    }
    ins.push_back(*t);
    *flags |= flag;
  }
  return ins;
}

}  // namespace

absl::Status sgd_step_(const Tensor& param, const Tensor& grad,
                       const Tensor& momentum_buffer, MixrtSgdAttrs attrs,
                       const StepScaling& scaling) {
  constexpr absl::string_view kOp = "sgd_step_";
  MIXRT_RETURN_IF_ERROR(CheckMasterWeight(param, kOp));
  std::vector<Tensor> outs = {param};
  if (attrs.momentum != 0) {
    MIXRT_RETURN_IF_ERROR(
        CheckState(param, momentum_buffer, "momentum buffer", kOp));
    outs.push_back(momentum_buffer);
  }
  MIXRT_ASSIGN_OR_RETURN(std::vector<Tensor> ins,
                         Inputs(param, grad, scaling, kOp, &attrs.flags));
  attrs.struct_size = sizeof(attrs);
  if (param.numel() == 0) return absl::OkStatus();
  return LaunchKernel(MIXRT_OP_SGD_STEP, ins, outs, &attrs);
}

absl::Status multi_tensor_sgd_step_(absl::Span<const Tensor> params,
                                    absl::Span<const Tensor> grads,
                                    absl::Span<const Tensor> momentum_buffers,
                                    MixrtSgdAttrs attrs,
                                    const StepScaling& scaling) {
  constexpr absl::string_view kOp = "multi_tensor_sgd_step_";
  const bool momentum = attrs.momentum != 0;
  if (grads.size() != params.size() ||
      momentum_buffers.size() != (momentum ? params.size() : 0)) {
    return absl::InvalidArgumentError(absl::StrCat(
        kOp, ": ", params.size(), " parameters need as many gradients",
        momentum ? " and momentum buffers" : "", ", got ", grads.size(),
        " and ", momentum_buffers.size()));
  }
  std::vector<Tensor> ins, outs, buffers, scalars;
  for (size_t i = 0; i < params.size(); ++i) {
    const Tensor& p = params[i];
    MIXRT_RETURN_IF_ERROR(CheckMasterWeight(p, kOp));
    if (i > 0) MIXRT_RETURN_IF_ERROR(CheckSameDevice(params[0], p, kOp));
    if (momentum) {
      MIXRT_RETURN_IF_ERROR(
          CheckState(p, momentum_buffers[i], "momentum buffer", kOp));
    }
    MIXRT_ASSIGN_OR_RETURN(std::vector<Tensor> step,
                           Inputs(p, grads[i], scaling, kOp, &attrs.flags));
    if (i == 0) scalars.assign(step.begin() + 1, step.end());
    if (p.numel() == 0) continue;  // As sgd_step_: nothing to launch.
    ins.push_back(step[0]);
    outs.push_back(p);
    if (momentum) buffers.push_back(momentum_buffers[i]);
  }
  attrs.struct_size = sizeof(attrs);
  if (outs.empty()) return absl::OkStatus();
  auto one_by_one = [&]() -> absl::Status {
    for (size_t i = 0; i < params.size(); ++i) {
      MIXRT_RETURN_IF_ERROR(sgd_step_(params[i], grads[i],
                                      momentum ? momentum_buffers[i] : Tensor(),
                                      attrs, scaling));
    }
    return absl::OkStatus();
  };
  const Device& device = params[0].device();
  if (device.backend()->identity().abi_minor < 1) return one_by_one();
  ins.insert(ins.end(), scalars.begin(), scalars.end());
  outs.insert(outs.end(), buffers.begin(), buffers.end());
  const absl::Status launched =
      LaunchKernel(MIXRT_OP_MULTI_TENSOR_SGD_STEP, ins, outs, &attrs);
  // A 1.1 plugin without the op refuses it before touching anything.
  if (absl::IsUnimplemented(launched)) return one_by_one();
  return launched;
}

absl::Status adamw_step_(const Tensor& param, const Tensor& grad,
                         const Tensor& exp_avg, const Tensor& exp_avg_sq,
                         const Tensor& step, MixrtAdamWAttrs attrs,
                         const StepScaling& scaling,
                         const Tensor& max_exp_avg_sq) {
  constexpr absl::string_view kOp = "adamw_step_";
  MIXRT_RETURN_IF_ERROR(CheckMasterWeight(param, kOp));
  MIXRT_RETURN_IF_ERROR(CheckState(param, exp_avg, "exp_avg", kOp));
  MIXRT_RETURN_IF_ERROR(CheckState(param, exp_avg_sq, "exp_avg_sq", kOp));
  const bool amsgrad = max_exp_avg_sq.defined();
  if (amsgrad) {
    MIXRT_RETURN_IF_ERROR(
        CheckState(param, max_exp_avg_sq, "max_exp_avg_sq", kOp));
    const uint32_t minor = param.device().backend()->identity().abi_minor;
    if (minor < 2) {
      return absl::UnimplementedError(
          absl::StrCat(kOp, ": amsgrad needs a plugin of ABI 1.2 or later; ",
                       param.device().backend()->name(), " is ABI 1.", minor,
                       " and would step as plain AdamW"));
    }
  }
  MIXRT_RETURN_IF_ERROR(CheckSameDevice(param, step, kOp));
  if (step.numel() != 1 || step.dtype() != DType::kF32) {
    return absl::InvalidArgumentError(
        absl::StrCat(kOp, ": step must be a one-element f32 tensor"));
  }
  MIXRT_ASSIGN_OR_RETURN(std::vector<Tensor> ins,
                         Inputs(param, grad, scaling, kOp, &attrs.flags));
  // Said by max_exp_avg_sq alone, as the scalars' bits by the scalars.
  if (amsgrad) attrs.flags |= MIXRT_OPTIM_AMSGRAD;
  attrs.struct_size = sizeof(attrs);
  const Tensor outs[] = {param, exp_avg, exp_avg_sq, step, max_exp_avg_sq};
  return LaunchKernel(MIXRT_OP_ADAMW_STEP, absl::MakeConstSpan(ins),
                      absl::MakeConstSpan(outs, amsgrad ? 5 : 4), &attrs);
}

}  // namespace mixrt::kernels
