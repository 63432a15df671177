#include "core/compiler/passes.h"

#include <vector>

namespace mixrt::compiler {

int EliminateDeadLaunches(Graph* graph) {
  std::vector<bool> live(graph->slots.size(), false);
  for (size_t s = 0; s < graph->slots.size(); ++s) {
    const StorageSlot& slot = graph->slots[s];
    live[s] = slot.kind != StorageSlot::Kind::kInternal || slot.returned ||
              slot.saved;
  }
  for (const ValueRef& v : graph->outputs) live[v.slot] = true;
  // Backwards: a kept node makes what it reads live. One pass suffices:
  // a slot's readers come after its writers.
  std::vector<bool> keep(graph->nodes.size(), false);
  for (size_t i = graph->nodes.size(); i-- > 0;) {
    const GraphNode& n = graph->nodes[i];
    bool needed = false;
    for (const ValueRef& v : n.outputs) needed |= live[v.slot];
    if (!needed) continue;
    keep[i] = true;
    for (const ValueRef& v : n.inputs) live[v.slot] = true;
  }
  std::vector<GraphNode> kept;
  for (size_t i = 0; i < graph->nodes.size(); ++i) {
    if (keep[i]) kept.push_back(std::move(graph->nodes[i]));
  }
  const int removed = static_cast<int>(graph->nodes.size() - kept.size());
  graph->nodes = std::move(kept);
  return removed;
}

}  // namespace mixrt::compiler
