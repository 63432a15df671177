// What a compiled function's call is matched on (torch.compile's guards):
// per input its dtype, device, shape, strides, requires_grad and aliasing,
// and the grad, inference and autocast modes. Named guards explain a
// recompile; the packed key is what every call computes to find its
// traces.
#ifndef MIXRT_CORE_COMPILER_CALL_SIGNATURE_H_
#define MIXRT_CORE_COMPILER_CALL_SIGNATURE_H_

#include <string>
#include <utility>
#include <vector>

#include "core/tensor/tensor.h"

namespace mixrt::compiler {

// One assumption of a trace, named for the explain log.
struct Guard {
  std::string name;
  std::string value;
};

// The named guards of a call with `inputs` in the current modes.
std::vector<Guard> GuardsFor(const std::vector<Tensor>& inputs);

// The guards' values packed as bytes. With `dynamic`, the listed (input,
// dim) sizes are left out, and the strides of an input holding one are its
// contiguity (they depend on it). With `stable`, backends are named, not
// addressed: the same in every process (for the compile cache).
std::string SignatureKey(const std::vector<Tensor>& inputs,
                         const std::vector<std::pair<int, int>>* dynamic,
                         bool stable = false);

// The first guard of `now` that differs from `before`, for the log.
std::string FirstGuardDifference(const std::vector<Guard>& before,
                                 const std::vector<Guard>& now);

}  // namespace mixrt::compiler

#endif  // MIXRT_CORE_COMPILER_CALL_SIGNATURE_H_
