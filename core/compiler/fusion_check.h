// A plugin's fused kernel checked before a plan trusts it: the group and
// the launches it replaces run side by side on the graph's shapes and
// weights (synthetic values, the same for both, for the rest), and the
// values the group stores must agree within the tolerance of the lowest
// precision in the group. A group that disagrees (a kernel that writes
// nothing, or wrong values) is dropped and runs op by op, with the reason
// in Explain and on stderr.
//
// MIXRT_COMPILE_CHECK_FUSION: unset, "auto": plugins other than mixrt's
// own (cpu, cuda, rocm, reference) are checked; "on": every plugin; "off":
// none.
#ifndef MIXRT_CORE_COMPILER_FUSION_CHECK_H_
#define MIXRT_CORE_COMPILER_FUSION_CHECK_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/compiler/graph.h"
#include "core/plugin/backend.h"

namespace mixrt::compiler {

inline constexpr char kCheckFusionEnv[] = "MIXRT_COMPILE_CHECK_FUSION";

// Whether groups fused by `backend` are checked (the variable above).
bool ChecksFusionOf(const Backend& backend);

// Why `kernel` cannot stand for `nodes` of `g` ("" when it agrees): its
// `inputs` (fusion values it reads) get the same synthetic values on both
// sides and its `outputs` (values it stores) are compared. An error is a
// failure to run either side.
absl::StatusOr<std::string> CheckFusedGroup(
    const Graph& g, const std::vector<int>& nodes,
    const PluginFusedKernel& kernel, const std::vector<ValueRef>& value_refs,
    const std::vector<int>& inputs, const std::vector<int>& outputs);

}  // namespace mixrt::compiler

#endif  // MIXRT_CORE_COMPILER_FUSION_CHECK_H_
