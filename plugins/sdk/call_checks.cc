#include "plugins/sdk/call_checks.h"

#include "absl/strings/str_cat.h"
#include "mixrt/op_names.h"
#include "mixrt/status_macros.h"

namespace mixrt::sdk {

absl::Status ExpectArity(const KernelCall& call, size_t min_inputs,
                         size_t max_inputs, size_t outputs) {
  if (call.inputs.size() < min_inputs || call.inputs.size() > max_inputs ||
      call.outputs.size() != outputs) {
    return absl::InvalidArgumentError(
        absl::StrCat(MixrtOpName(call.op), " takes ", min_inputs, "-",
                     max_inputs, " input(s) and ", outputs, " output(s); got ",
                     call.inputs.size(), " and ", call.outputs.size()));
  }
  return absl::OkStatus();
}

absl::Status ExpectSameShapes(const KernelCall& call) {
  for (const TensorRef& in : call.inputs) {
    if (!in.same_shape(call.outputs[0])) {
      return absl::InvalidArgumentError(
          absl::StrCat(MixrtOpName(call.op),
                       ": an input's shape differs from the output's"));
    }
  }
  return absl::OkStatus();
}

absl::Status ExpectF32Scalar(const KernelCall& call, const TensorRef& t,
                             const char* what) {
  if (t.dtype() != MIXRT_DTYPE_F32 || t.numel() != 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        MixrtOpName(call.op), ": ", what, " must be a one-element f32 tensor"));
  }
  return absl::OkStatus();
}

absl::StatusOr<MixrtPointwiseAttrs> PointwiseAttrs(const KernelCall& call,
                                                   uint32_t kind_count) {
  MIXRT_ASSIGN_OR_RETURN(auto attrs, call.GetAttrs<MixrtPointwiseAttrs>());
  if (attrs->kind >= kind_count) {
    return absl::UnimplementedError(absl::StrCat(
        MixrtOpName(call.op), ": kind ", attrs->kind, " is unknown here"));
  }
  return *attrs;
}

absl::StatusOr<MixrtPointwiseAttrs> BinaryAttrs(const KernelCall& call) {
  MIXRT_ASSIGN_OR_RETURN(auto attrs, PointwiseAttrs(call, MIXRT_BINARY_COUNT));
  const MixrtDtype out = call.outputs[0].dtype();
  if (call.inputs[0].dtype() != out || call.inputs[1].dtype() != out ||
      out == MIXRT_DTYPE_BOOL) {
    return absl::InvalidArgumentError(
        "binary op needs one non-bool dtype for inputs and output");
  }
  return attrs;
}

absl::StatusOr<MixrtPointwiseAttrs> UnaryAttrs(const KernelCall& call) {
  MIXRT_ASSIGN_OR_RETURN(auto attrs, PointwiseAttrs(call, MIXRT_UNARY_COUNT));
  for (const TensorRef& t : call.inputs) {
    if (t.dtype() != call.outputs[0].dtype()) {
      return absl::InvalidArgumentError("unary op needs one dtype throughout");
    }
  }
  return attrs;
}

absl::StatusOr<MixrtPointwiseAttrs> CompareAttrs(const KernelCall& call) {
  MIXRT_ASSIGN_OR_RETURN(auto attrs, PointwiseAttrs(call, MIXRT_COMPARE_COUNT));
  if (call.inputs[0].dtype() != call.inputs[1].dtype() ||
      call.outputs[0].dtype() != MIXRT_DTYPE_BOOL) {
    return absl::InvalidArgumentError(
        "compare needs inputs of one dtype and a bool output");
  }
  return attrs;
}

absl::Status CheckWhereDtypes(const KernelCall& call) {
  const MixrtDtype out = call.outputs[0].dtype();
  if (call.inputs[0].dtype() != MIXRT_DTYPE_BOOL ||
      call.inputs[1].dtype() != out || call.inputs[2].dtype() != out) {
    return absl::InvalidArgumentError(
        "where needs a bool condition and one dtype for values and output");
  }
  return absl::OkStatus();
}

}  // namespace mixrt::sdk
