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

}  // namespace mixrt::sdk
