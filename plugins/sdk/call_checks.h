// Argument checks every plugin's kernel_launch needs before touching data:
// input/output counts, same-shape pointwise operands, and pointwise kinds.
// Shared so each backend refuses a malformed call with the same words.
#ifndef MIXRT_PLUGINS_SDK_CALL_CHECKS_H_
#define MIXRT_PLUGINS_SDK_CALL_CHECKS_H_

#include <cstddef>
#include <cstdint>

#include "plugins/sdk/plugin.h"
#include "plugins/sdk/status.h"

namespace mixrt::sdk {

// Checks the number of inputs and outputs of `call`.
Status ExpectArity(const KernelCall& call, size_t min_inputs, size_t max_inputs,
                   size_t outputs);

// Checks that every input has the first output's shape (the host expands
// broadcasts before launching).
Status ExpectSameShapes(const KernelCall& call);

// `t` (named `what` in the error) is a one-element f32 tensor: a scale, a
// found_inf flag, a norm.
Status ExpectF32Scalar(const KernelCall& call, const TensorRef& t,
                       const char* what);

// The call's MixrtPointwiseAttrs, with a kind below `kind_count`
// (UNIMPLEMENTED otherwise: a newer host may know more kinds).
StatusOr<MixrtPointwiseAttrs> PointwiseAttrs(const KernelCall& call,
                                             uint32_t kind_count);

// Each pointwise op's attributes with its dtype rules (plugin_api.h)
// checked, for every plugin: binary, inputs and output of one non-bool
// dtype; unary and its backward, one dtype throughout; compare, inputs of
// one dtype and a bool output. Arity and shapes are ExpectArity's and
// ExpectSameShapes'.
StatusOr<MixrtPointwiseAttrs> BinaryAttrs(const KernelCall& call);
StatusOr<MixrtPointwiseAttrs> UnaryAttrs(const KernelCall& call);
StatusOr<MixrtPointwiseAttrs> CompareAttrs(const KernelCall& call);
// where: a bool condition, values and output of one dtype.
Status CheckWhereDtypes(const KernelCall& call);

}  // namespace mixrt::sdk

#endif  // MIXRT_PLUGINS_SDK_CALL_CHECKS_H_
