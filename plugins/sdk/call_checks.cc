#include "plugins/sdk/call_checks.h"

#include "mixrt/op_names.h"
#include "mixrt/status_macros.h"
#include "plugins/sdk/strings.h"

namespace mixrt::sdk {

Status ExpectArity(const KernelCall& call, size_t min_inputs, size_t max_inputs,
                   size_t outputs) {
  if (call.inputs.size() < min_inputs || call.inputs.size() > max_inputs ||
      call.outputs.size() != outputs) {
    return InvalidArgumentError(
        StrCat(MixrtOpName(call.op), " takes ", min_inputs, "-", max_inputs,
               " input(s) and ", outputs, " output(s); got ",
               call.inputs.size(), " and ", call.outputs.size()));
  }
  return OkStatus();
}

Status ExpectSameShapes(const KernelCall& call) {
  for (const TensorRef& in : call.inputs) {
    if (!in.same_shape(call.outputs[0])) {
      return InvalidArgumentError(
          StrCat(MixrtOpName(call.op),
                 ": an input's shape differs from the output's"));
    }
  }
  return OkStatus();
}

Status ExpectF32Scalar(const KernelCall& call, const TensorRef& t,
                       const char* what) {
  if (t.dtype() != MIXRT_DTYPE_F32 || t.numel() != 1) {
    return InvalidArgumentError(StrCat(MixrtOpName(call.op), ": ", what,
                                       " must be a one-element f32 tensor"));
  }
  return OkStatus();
}

StatusOr<MixrtPointwiseAttrs> PointwiseAttrs(const KernelCall& call,
                                             uint32_t kind_count) {
  MIXRT_ASSIGN_OR_RETURN(auto attrs, call.GetAttrs<MixrtPointwiseAttrs>());
  if (attrs->kind >= kind_count) {
    return UnimplementedError(StrCat(MixrtOpName(call.op), ": kind ",
                                     attrs->kind, " is unknown here"));
  }
  return *attrs;
}

StatusOr<MixrtPointwiseAttrs> BinaryAttrs(const KernelCall& call) {
  MIXRT_ASSIGN_OR_RETURN(auto attrs, PointwiseAttrs(call, MIXRT_BINARY_COUNT));
  const MixrtDtype out = call.outputs[0].dtype();
  if (call.inputs[0].dtype() != out || call.inputs[1].dtype() != out ||
      out == MIXRT_DTYPE_BOOL) {
    return InvalidArgumentError(
        "binary op needs one non-bool dtype for inputs and output");
  }
  return attrs;
}

StatusOr<MixrtPointwiseAttrs> UnaryAttrs(const KernelCall& call) {
  MIXRT_ASSIGN_OR_RETURN(auto attrs, PointwiseAttrs(call, MIXRT_UNARY_COUNT));
  for (const TensorRef& t : call.inputs) {
    if (t.dtype() != call.outputs[0].dtype()) {
      return InvalidArgumentError("unary op needs one dtype throughout");
    }
  }
  return attrs;
}

StatusOr<MixrtPointwiseAttrs> CompareAttrs(const KernelCall& call) {
  MIXRT_ASSIGN_OR_RETURN(auto attrs, PointwiseAttrs(call, MIXRT_COMPARE_COUNT));
  if (call.inputs[0].dtype() != call.inputs[1].dtype() ||
      call.outputs[0].dtype() != MIXRT_DTYPE_BOOL) {
    return InvalidArgumentError(
        "compare needs inputs of one dtype and a bool output");
  }
  return attrs;
}

Status CheckWhereDtypes(const KernelCall& call) {
  const MixrtDtype out = call.outputs[0].dtype();
  if (call.inputs[0].dtype() != MIXRT_DTYPE_BOOL ||
      call.inputs[1].dtype() != out || call.inputs[2].dtype() != out) {
    return InvalidArgumentError(
        "where needs a bool condition and one dtype for values and output");
  }
  return OkStatus();
}

}  // namespace mixrt::sdk
