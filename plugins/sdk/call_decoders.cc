#include "plugins/sdk/call_decoders.h"

#include "absl/strings/str_cat.h"
#include "mixrt/op_names.h"
#include "mixrt/status_macros.h"
#include "plugins/sdk/call_checks.h"
#include "plugins/sdk/optimizer_math.h"

namespace mixrt::sdk {

absl::StatusOr<OptimizerStepCall> DecodeOptimizerStep(const KernelCall& call,
                                                      uint32_t flags,
                                                      size_t state_outputs) {
  const size_t inputs = 1 + OptimizerOptionalInputs(flags);
  MIXRT_RETURN_IF_ERROR(ExpectArity(call, inputs, inputs, state_outputs));
  for (const TensorRef& t : call.outputs) {
    if (t.dtype() != MIXRT_DTYPE_F32) {
      return absl::InvalidArgumentError(absl::StrCat(
          MixrtOpName(call.op), ": parameters and optimizer state are f32"));
    }
  }
  OptimizerStepCall step;
  step.grad = &call.inputs[0];
  if (!IsFloatingDtype(step.grad->dtype()) ||
      !step.grad->same_shape(call.outputs[0])) {
    return absl::InvalidArgumentError(absl::StrCat(
        MixrtOpName(call.op),
        ": the gradient must be floating, with the param's shape"));
  }
  size_t next = 1;
  if (flags & MIXRT_OPTIM_HAS_GRAD_SCALE) {
    step.grad_scale = &call.inputs[next++];
    MIXRT_RETURN_IF_ERROR(
        ExpectF32Scalar(call, *step.grad_scale, "grad_scale"));
  }
  if (flags & MIXRT_OPTIM_HAS_FOUND_INF) {
    step.found_inf = &call.inputs[next];
    MIXRT_RETURN_IF_ERROR(ExpectF32Scalar(call, *step.found_inf, "found_inf"));
  }
  return step;
}

absl::StatusOr<CrossEntropyCall> DecodeCrossEntropy(const KernelCall& call) {
  CrossEntropyCall ce;
  ce.backward = call.op == MIXRT_OP_CROSS_ENTROPY_BACKWARD;
  const size_t inputs = ce.backward ? 3 : 2;
  MIXRT_RETURN_IF_ERROR(ExpectArity(call, inputs, inputs, 1));
  MIXRT_ASSIGN_OR_RETURN(ce.attrs, call.GetAttrs<MixrtCrossEntropyAttrs>());
  if (ce.backward) ce.grad_loss = &call.inputs[0];
  ce.logits = &call.inputs[ce.backward ? 1 : 0];
  ce.target = &call.inputs[ce.backward ? 2 : 1];
  ce.out = &call.outputs[0];
  if (ce.logits->ndim() != 2 || ce.target->ndim() != 1 ||
      ce.target->dim(0) != ce.logits->dim(0) ||
      ce.target->dtype() != MIXRT_DTYPE_I64) {
    return absl::InvalidArgumentError(
        "cross_entropy takes logits [N, C] and i64 targets [N]");
  }
  return ce;
}

absl::Status CheckCrossEntropyTargets(const CrossEntropyCall& call) {
  const int64_t classes = call.classes();
  const int64_t ignore = call.attrs->ignore_index;
  for (int64_t r = 0; r < call.rows(); ++r) {
    const int64_t t = call.target->LoadInt(r * call.target->stride(0));
    if (t != ignore && (t < 0 || t >= classes)) {
      return absl::InvalidArgumentError(
          absl::StrCat("cross_entropy: target ", t, " at row ", r,
                       " is out of range [0, ", classes, ")"));
    }
  }
  return absl::OkStatus();
}

absl::Status ExpectMultiTensorNorm(const KernelCall& call) {
  if (call.outputs.size() != 1) {
    return absl::InvalidArgumentError(
        "multi_tensor_norm takes any number of inputs and one output");
  }
  MIXRT_RETURN_IF_ERROR(ExpectF32Scalar(call, call.outputs[0], "the norm"));
  for (size_t i = 0; i < call.inputs.size(); ++i) {
    const TensorRef& t = call.inputs[i];
    if (!IsFloatingDtype(t.dtype()) || !t.is_contiguous()) {
      return absl::InvalidArgumentError(
          absl::StrCat("multi_tensor_norm: input ", i,
                       " must be a contiguous floating tensor"));
    }
  }
  return absl::OkStatus();
}

}  // namespace mixrt::sdk
