#include "plugins/sdk/call_decoders.h"

#include "mixrt/op_names.h"
#include "mixrt/status_macros.h"
#include "plugins/sdk/call_checks.h"
#include "plugins/sdk/optimizer_math.h"
#include "plugins/sdk/strings.h"

namespace mixrt::sdk {

StatusOr<OptimizerStepCall> DecodeOptimizerStep(const KernelCall& call,
                                                uint32_t flags,
                                                size_t state_outputs) {
  if ((flags & ~KnownOptimizerFlags(call.op)) != 0) {
    return InvalidArgumentError(
        StrCat(MixrtOpName(call.op), ": unknown optimizer flags ",
               flags & ~KnownOptimizerFlags(call.op),
               " (this plugin knows grad_scale, found_inf and AdamW's "
               "amsgrad)"));
  }
  const size_t inputs = 1 + OptimizerOptionalInputs(flags);
  MIXRT_RETURN_IF_ERROR(ExpectArity(call, inputs, inputs, state_outputs));
  for (const TensorRef& t : call.outputs) {
    if (t.dtype() != MIXRT_DTYPE_F32) {
      return InvalidArgumentError(StrCat(
          MixrtOpName(call.op), ": parameters and optimizer state are f32"));
    }
  }
  OptimizerStepCall step;
  step.grad = &call.inputs[0];
  if (!IsFloatingDtype(step.grad->dtype()) ||
      !step.grad->same_shape(call.outputs[0])) {
    return InvalidArgumentError(
        StrCat(MixrtOpName(call.op),
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

StatusOr<std::vector<KernelCall>> SplitMultiTensorSgd(const KernelCall& call) {
  MIXRT_ASSIGN_OR_RETURN(auto attrs, call.GetAttrs<MixrtSgdAttrs>());
  const size_t extras = OptimizerOptionalInputs(attrs->flags);
  const size_t per_param = attrs->momentum != 0 ? 2 : 1;
  const size_t n =
      call.inputs.size() > extras ? call.inputs.size() - extras : 0;
  if (n == 0 || call.outputs.size() != n * per_param) {
    return InvalidArgumentError(StrCat(
        "multi_tensor_sgd_step: ", call.inputs.size(), " inputs and ",
        call.outputs.size(), " outputs do not make n >= 1 steps of (grad",
        extras > 0 ? " + shared scalars" : "", ") -> (param",
        per_param == 2 ? ", momentum_buffer" : "", ")"));
  }
  std::vector<KernelCall> steps(n);
  for (size_t i = 0; i < n; ++i) {
    KernelCall& step = steps[i];
    step.device = call.device;
    step.op = MIXRT_OP_SGD_STEP;
    step.attrs = call.attrs;
    step.inputs.push_back(call.inputs[i]);
    for (size_t e = 0; e < extras; ++e)
      step.inputs.push_back(call.inputs[n + e]);
    step.outputs.push_back(call.outputs[i]);
    if (per_param == 2) step.outputs.push_back(call.outputs[n + i]);
  }
  return steps;
}

Status RunEachSgdStep(const KernelCall& call,
                      std::function<Status(const KernelCall&)> sgd_step) {
  MIXRT_ASSIGN_OR_RETURN(std::vector<KernelCall> steps,
                         SplitMultiTensorSgd(call));
  for (const KernelCall& step : steps) MIXRT_RETURN_IF_ERROR(sgd_step(step));
  return OkStatus();
}

StatusOr<CrossEntropyCall> DecodeCrossEntropy(const KernelCall& call) {
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
    return InvalidArgumentError(
        "cross_entropy takes logits [N, C] and i64 targets [N]");
  }
  return ce;
}

Status CheckCrossEntropyTargets(const CrossEntropyCall& call) {
  const int64_t classes = call.classes();
  const int64_t ignore = call.attrs->ignore_index;
  for (int64_t r = 0; r < call.rows(); ++r) {
    const int64_t t = call.target->LoadInt(r * call.target->stride(0));
    if (t != ignore && (t < 0 || t >= classes)) {
      return InvalidArgumentError(StrCat("cross_entropy: target ", t,
                                         " at row ", r, " is out of range [0, ",
                                         classes, ")"));
    }
  }
  return OkStatus();
}

Status ExpectMultiTensorNorm(const KernelCall& call) {
  if (call.outputs.size() != 1) {
    return InvalidArgumentError(
        "multi_tensor_norm takes any number of inputs and one output");
  }
  MIXRT_RETURN_IF_ERROR(ExpectF32Scalar(call, call.outputs[0], "the norm"));
  for (size_t i = 0; i < call.inputs.size(); ++i) {
    const TensorRef& t = call.inputs[i];
    if (!IsFloatingDtype(t.dtype()) || !t.is_contiguous()) {
      return InvalidArgumentError(
          StrCat("multi_tensor_norm: input ", i,
                 " must be a contiguous floating tensor"));
    }
  }
  return OkStatus();
}

StatusOr<DropoutCall> DecodeDropout(const KernelCall& call) {
  MIXRT_ASSIGN_OR_RETURN(auto attrs, call.GetAttrs<MixrtDropoutAttrs>());
  MIXRT_RETURN_IF_ERROR(ExpectArity(call, 1, 1, 1));
  MIXRT_RETURN_IF_ERROR(ExpectSameShapes(call));
  const DropoutCall d{*attrs, &call.inputs[0], &call.outputs[0]};
  if (!IsFloatingDtype(d.x->dtype()) || d.out->dtype() != d.x->dtype()) {
    return InvalidArgumentError(
        "dropout: the input must be floating and the output of its dtype");
  }
  if (!(d.attrs.p >= 0 && d.attrs.p < 1)) {
    return InvalidArgumentError(
        StrCat("dropout: p must be in [0, 1), got ", d.attrs.p));
  }
  return d;
}

StatusOr<AttentionCall> DecodeAttention(const KernelCall& call) {
  AttentionCall a;
  a.backward = call.op == MIXRT_OP_SCALED_DOT_PRODUCT_ATTENTION_BACKWARD;
  MIXRT_ASSIGN_OR_RETURN(a.attrs, call.GetAttrs<MixrtAttentionAttrs>());
  const std::string op(MixrtOpName(call.op));
  if (a.attrs->mask_kind > MIXRT_ATTENTION_MASK_ADDITIVE) {
    return UnimplementedError(
        StrCat(op, ": mask kind ", a.attrs->mask_kind, " is unknown"));
  }
  if (!(a.attrs->dropout_p >= 0 && a.attrs->dropout_p < 1)) {
    return InvalidArgumentError(StrCat(op, ": dropout_p must be in [0, 1)"));
  }
  const bool has_mask = a.attrs->mask_kind != MIXRT_ATTENTION_MASK_NONE;
  const size_t inputs = (a.backward ? 6 : 3) + (has_mask ? 1 : 0);
  MIXRT_RETURN_IF_ERROR(ExpectArity(call, inputs, inputs, a.backward ? 3 : 2));
  size_t i = 0;
  if (a.backward) a.grad_out = &call.inputs[i++];
  a.q = &call.inputs[i++];
  a.k = &call.inputs[i++];
  a.v = &call.inputs[i++];
  if (a.backward) {
    a.out = &call.inputs[i++];
    a.lse = &call.inputs[i++];
    a.grad_q = &call.outputs[0];
    a.grad_k = &call.outputs[1];
    a.grad_v = &call.outputs[2];
  } else {
    a.out = &call.outputs[0];
    a.lse = &call.outputs[1];
  }
  if (has_mask) a.mask = &call.inputs[i];
  const auto refuse = [&](std::string_view why) {
    return InvalidArgumentError(StrCat(op, ": ", why));
  };
  for (const TensorRef* t : {a.q, a.k, a.v}) {
    if (t->ndim() != 3 || !t->is_contiguous() || t->dtype() != a.q->dtype() ||
        !IsFloatingDtype(t->dtype())) {
      return refuse(
          "q, k and v must be contiguous [G, L, E], [G, S, E], [G, S, Ev] "
          "in one floating dtype");
    }
  }
  a.groups = a.q->dim(0);
  a.queries = a.q->dim(1);
  a.head_dim = a.q->dim(2);
  a.keys = a.k->dim(1);
  a.value_dim = a.v->dim(2);
  if (a.k->dim(0) != a.groups || a.v->dim(0) != a.groups ||
      a.k->dim(2) != a.head_dim || a.v->dim(1) != a.keys) {
    return refuse("q, k and v disagree on G, E or S");
  }
  const auto expect = [&](const TensorRef* t,
                          std::initializer_list<int64_t> dims, bool f32,
                          std::string_view what) -> Status {
    bool ok =
        t->ndim() == static_cast<int>(dims.size()) && t->is_contiguous() &&
        (f32 ? t->dtype() == MIXRT_DTYPE_F32 : t->dtype() == a.q->dtype());
    int d = 0;
    for (int64_t want : dims) ok = ok && t->dim(d++) == want;
    if (!ok) return refuse(StrCat(what, " has the wrong shape or dtype"));
    return OkStatus();
  };
  MIXRT_RETURN_IF_ERROR(
      expect(a.out, {a.groups, a.queries, a.value_dim}, false, "out"));
  MIXRT_RETURN_IF_ERROR(expect(a.lse, {a.groups, a.queries}, true, "lse"));
  if (a.backward) {
    MIXRT_RETURN_IF_ERROR(expect(a.grad_out, {a.groups, a.queries, a.value_dim},
                                 false, "grad_out"));
    MIXRT_RETURN_IF_ERROR(
        expect(a.grad_q, {a.groups, a.queries, a.head_dim}, false, "grad_q"));
    MIXRT_RETURN_IF_ERROR(
        expect(a.grad_k, {a.groups, a.keys, a.head_dim}, false, "grad_k"));
    MIXRT_RETURN_IF_ERROR(
        expect(a.grad_v, {a.groups, a.keys, a.value_dim}, false, "grad_v"));
  }
  if (has_mask) {
    const bool bool_kind = a.attrs->mask_kind == MIXRT_ATTENTION_MASK_BOOL;
    const bool dtype_ok = bool_kind ? a.mask->dtype() == MIXRT_DTYPE_BOOL
                                    : IsFloatingDtype(a.mask->dtype());
    if (a.mask->ndim() != 3 || !dtype_ok || a.mask->dim(0) != a.groups ||
        a.mask->dim(1) != a.queries || a.mask->dim(2) != a.keys) {
      return refuse(
          "the mask must be [G, L, S], bool or floating as its kind says");
    }
  }
  return a;
}

}  // namespace mixrt::sdk
