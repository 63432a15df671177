// Source code for a fused loop group: one translation unit that compiles
// both as CUDA (NVRTC, for the GPU plugins) and as host C++ (the system
// compiler, for CPU code generation), so the host build checks the same
// text a GPU runs. Shapes, strides and op attributes are constants in the
// source: a group's kernel is specialized to its graph. Each op's result is
// rounded to its dtype before the next op reads it, as op by op in memory.
// Pointwise groups (binary, unary and unary_backward of the exact kinds,
// compare, where, casts) for both; for the host also groups ending in
// reductions.
#ifndef MIXRT_PLUGINS_SDK_LOOP_CODEGEN_H_
#define MIXRT_PLUGINS_SDK_LOOP_CODEGEN_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "plugins/sdk/fusion.h"

namespace mixrt::sdk {

struct LoopSource {
  std::string source;
  // The entry points: `<name>` is a CUDA kernel taking (<name>_args, n)
  // by value, launched over n = numel threads (any grid: it strides);
  // `<name>_host` a C function (void* const* args, int64 begin, int64 end)
  // running units [begin, end): rows of the innermost dims the inputs step
  // through evenly, with column reductions column blocks, with whole-row
  // reductions pieces of rows (see units and partials). A group with
  // reductions has no CUDA entry.
  std::string name;
  // Argument k of either entry: the address of fusion value values[k]
  // (null for a reduction's result nobody reads: it is not stored).
  std::vector<int> values;
  int64_t numel = 0;
  // What `<name>_host` iterates over, and the elements each unit covers.
  int64_t units = 0;
  int64_t elements_per_unit = 1;
  // Whole-row reductions: the host entry takes one more argument, after
  // the values', the address of `partials` doubles (a piece's result per
  // unit and reduction), and once units [0, units) have all run, unit
  // `units` run alone adds them up in order and stores the results.
  bool finishes = false;
  int64_t partials = 0;
};

struct LoopSourceOptions {
  // Chains ending in sums, means, maxima or minima over one run of dims,
  // host code only, in the CPU plugin's reduce kernel's order (its
  // fused-loop interpreter repeats it), so the results agree bit for bit:
  // over leading or middle dims (a bias gradient, a batch norm's
  // statistics) each column's accumulator is a double taking the rows in
  // order; over the innermost dims (a loss's mean, a row's sum) pieces of
  // 2^16 elements are summed in chunks of 256 in eight double lanes and
  // the pieces added in order.
  bool host_reductions = false;
};

// UNIMPLEMENTED for a group this generator cannot write (a reduction
// unless asked for, an integer result, a symbolic size).
absl::StatusOr<LoopSource> GenerateLoopSource(
    const FusionGraph& graph, absl::Span<const int> group_of_node, int group,
    LoopSourceOptions options = {});

// The shape node `n` iterates over when the generator can write it (a
// pointwise op of a kind it knows, static float or bool values), else
// empty: the iteration_shape of sdk::LoopRules for a generating plugin.
std::vector<int64_t> LoopCodegenShape(const FusionGraph& graph,
                                      const FusionNode& n);

}  // namespace mixrt::sdk

#endif  // MIXRT_PLUGINS_SDK_LOOP_CODEGEN_H_
