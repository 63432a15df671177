// A fused loop run by code generated for its group (plugins/sdk/
// loop_codegen: pointwise chains, and chains ending in column reductions)
// and built by the system compiler (loop_compiler.h), with the fused-loop
// interpreter standing in where that cannot be: no compiler, a group the
// generator cannot write, MIXRT_CPU_CODEGEN=off, or, in async mode, until
// the built object loads. Both give the same results bit for bit, so which
// one ran never shows in a result; Explain says which one runs.
#ifndef MIXRT_BACKENDS_CPU_FUSION_GENERATED_LOOP_H_
#define MIXRT_BACKENDS_CPU_FUSION_GENERATED_LOOP_H_

#include <cstdint>
#include <memory>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "plugins/sdk/fusion.h"

namespace mixrt::cpu {

absl::StatusOr<std::unique_ptr<sdk::FusedKernel>> CompileGeneratedLoop(
    const sdk::FusionGraph& graph, absl::Span<const int> group_of_node,
    int group);

// Runs of generated code in this process (tests: whether a background
// build took over).
int64_t GeneratedLoopRuns();

}  // namespace mixrt::cpu

#endif  // MIXRT_BACKENDS_CPU_FUSION_GENERATED_LOOP_H_
