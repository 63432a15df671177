// What makes two launches of a graph the same computation, for the passes
// that merge repeats (within a graph, or a backward's repeat of its
// forward).
#ifndef MIXRT_CORE_COMPILER_LAUNCH_KEY_H_
#define MIXRT_CORE_COMPILER_LAUNCH_KEY_H_

#include <string>

#include "absl/functional/function_ref.h"
#include "core/compiler/graph.h"

namespace mixrt::compiler {

// Whether `v` is all of its slot, densely.
bool WholeSlot(const Graph& g, const ValueRef& v);

// The op, attributes, input views and output layouts of launch `n` as
// bytes. `slot_id` names each input's memory (a slot of another graph when
// the key is compared across graphs); outputs match by layout and size.
std::string LaunchKey(const Graph& g, const GraphNode& n,
                      absl::FunctionRef<int64_t(int)> slot_id);

}  // namespace mixrt::compiler

#endif  // MIXRT_CORE_COMPILER_LAUNCH_KEY_H_
