#include "core/compiler/passes.h"

#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "core/compiler/launch_key.h"

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

int EliminateCommonLaunches(Graph* graph) {
  const size_t slots = graph->slots.size();
  const std::vector<std::vector<int>> writers = SlotWriters(*graph);
  auto written_between = [&](int slot, int after, int before) {
    for (int w : writers[slot]) {
      if (w > after && w < before) return true;
    }
    return false;
  };
  auto single_internal = [&](const ValueRef& v) {
    return graph->slots[v.slot].kind == StorageSlot::Kind::kInternal &&
           writers[v.slot].size() == 1;
  };
  std::vector<int> replaced(slots, -1);  // Slot -> the slot read instead.
  absl::flat_hash_map<std::string, int> seen;  // Signature -> node.
  std::vector<bool> drop(graph->nodes.size(), false);
  for (size_t j = 0; j < graph->nodes.size(); ++j) {
    GraphNode& n = graph->nodes[j];
    for (ValueRef& v : n.inputs) {
      if (replaced[v.slot] >= 0) v.slot = replaced[v.slot];
    }
    if (n.kind != GraphNode::Kind::kLaunch) continue;
    bool candidate = true;
    for (const ValueRef& v : n.outputs) candidate &= single_internal(v);
    if (!candidate) continue;
    const std::string key =
        LaunchKey(*graph, n, [](int slot) -> int64_t { return slot; });
    auto [it, fresh] = seen.emplace(key, static_cast<int>(j));
    if (fresh) continue;
    const GraphNode& first = graph->nodes[it->second];
    bool same = true;
    for (const ValueRef& v : first.inputs) {
      same &= !written_between(v.slot, it->second, static_cast<int>(j));
    }
    for (const ValueRef& v : n.outputs) {
      const StorageSlot& slot = graph->slots[v.slot];
      same &= WholeSlot(*graph, v) && !slot.returned && !slot.saved;
    }
    if (!same) {
      it->second = static_cast<int>(j);  // Later repeats compare with this.
      continue;
    }
    for (size_t k = 0; k < n.outputs.size(); ++k) {
      replaced[n.outputs[k].slot] = first.outputs[k].slot;
    }
    drop[j] = true;
  }
  for (ValueRef& v : graph->outputs) {
    if (replaced[v.slot] >= 0) v.slot = replaced[v.slot];
  }
  std::vector<GraphNode> kept;
  for (size_t i = 0; i < graph->nodes.size(); ++i) {
    if (!drop[i]) kept.push_back(std::move(graph->nodes[i]));
  }
  const int removed = static_cast<int>(graph->nodes.size() - kept.size());
  graph->nodes = std::move(kept);
  return removed;
}

}  // namespace mixrt::compiler
