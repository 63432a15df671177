// The loop emitter: a sdk::LoopProgram printed as source code, one
// translation unit that compiles both as CUDA (NVRTC, for the GPU plugins)
// and as host C++ (the system compiler, for CPU code generation), so the
// host build checks the same text a GPU runs. Shapes, strides and op
// attributes are constants in the source: a group's kernel is specialized
// to its graph. Each step is a call of its element function from
// loop_elements.h and reductions follow reduction_order.h, both headers
// embedded in the source's prelude by the build; each step's result is
// rounded to its dtype before the next reads it, as op by op in memory.
// Pointwise groups of float values for both; for the host also groups
// ending in reductions.
#ifndef MIXRT_PLUGINS_SDK_LOOP_CODEGEN_H_
#define MIXRT_PLUGINS_SDK_LOOP_CODEGEN_H_

#include <cstdint>
#include <string>
#include <vector>

#include "plugins/sdk/fusion.h"
#include "plugins/sdk/loop_program.h"
#include "plugins/sdk/span.h"
#include "plugins/sdk/status.h"

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
  // host code only, in reduction_order.h's order (the CPU plugin's reduce
  // kernel and interpreter follow it), so the results agree bit for bit.
  bool host_reductions = false;
};

// UNIMPLEMENTED for a program it cannot print (reductions unless asked
// for, integer loads, GELU's gradient).
StatusOr<LoopSource> EmitLoopSource(const LoopProgram& program,
                                    LoopSourceOptions options = {});

// EmitLoopSource of the group's program (BuildLoopProgram's errors too).
StatusOr<LoopSource> GenerateLoopSource(const FusionGraph& graph,
                                        Span<const int> group_of_node,
                                        int group,
                                        LoopSourceOptions options = {});

// LoopIterationShape for a pointwise node of float or bool values whose
// step the emitter prints, else empty: the iteration_shape of
// sdk::LoopRules for a generating plugin.
std::vector<int64_t> LoopCodegenShape(const FusionGraph& graph,
                                      const FusionNode& n);

}  // namespace mixrt::sdk

#endif  // MIXRT_PLUGINS_SDK_LOOP_CODEGEN_H_
