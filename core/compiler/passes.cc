#include "core/compiler/passes.h"

#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "core/compiler/launch_key.h"
#include "mixrt/plugin_api.h"

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
  std::vector<bool> drop(graph->nodes.size(), true);
  for (size_t i = graph->nodes.size(); i-- > 0;) {
    const GraphNode& n = graph->nodes[i];
    // A host read is a guard: it stays, with what it reads.
    bool needed = n.kind == GraphNode::Kind::kHostRead;
    for (const ValueRef& v : n.outputs) needed |= live[v.slot];
    if (!needed) continue;
    drop[i] = false;
    for (const ValueRef& v : n.inputs) live[v.slot] = true;
  }
  return DropNodes(graph, drop);
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
  std::vector<int> replaced(slots, -1);        // Slot -> the slot read instead.
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
  return DropNodes(graph, drop);
}

namespace {

// The bytes [first, last] of its slot that view `v` can touch.
std::pair<int64_t, int64_t> ByteSpan(const ValueRef& v) {
  int64_t last = v.offset;
  for (size_t d = 0; d < v.shape.size(); ++d) {
    if (v.shape[d] == 0) return {0, -1};
    last += (v.shape[d] - 1) * v.strides[d];
  }
  const int64_t size = static_cast<int64_t>(DTypeSize(v.dtype));
  return {v.offset * size, (last + 1) * size - 1};
}

// Whether two views of one slot share no byte.
bool Apart(const ValueRef& a, const ValueRef& b) {
  const auto [a_first, a_last] = ByteSpan(a);
  const auto [b_first, b_last] = ByteSpan(b);
  return a_last < b_first || b_last < a_first;
}

}  // namespace

int PlaceCopiedResults(Graph* graph) {
  const size_t slots = graph->slots.size();
  std::vector<std::vector<int>> readers(slots);
  for (size_t i = 0; i < graph->nodes.size(); ++i) {
    for (const ValueRef& v : graph->nodes[i].inputs)
      readers[v.slot].push_back(static_cast<int>(i));
  }
  std::vector<bool> returned(slots, false);
  for (const ValueRef& v : graph->outputs) returned[v.slot] = true;
  auto temporary = [&](int slot) {
    const StorageSlot& s = graph->slots[slot];
    return s.kind == StorageSlot::Kind::kInternal && !s.returned && !s.saved &&
           !returned[slot];
  };
  std::vector<bool> drop(graph->nodes.size(), false);
  int placed = 0;
  std::vector<std::vector<int>> writers = SlotWriters(*graph);
  for (size_t c = 0; c < graph->nodes.size(); ++c) {
    const GraphNode& copy = graph->nodes[c];
    if (copy.kind != GraphNode::Kind::kLaunch || copy.op != MIXRT_OP_COPY ||
        copy.inputs.size() != 1 || copy.outputs.size() != 1) {
      continue;
    }
    const ValueRef& from = copy.inputs[0];
    const ValueRef& to = copy.outputs[0];
    if (from.slot == to.slot || from.dtype != to.dtype ||
        !temporary(from.slot) || !temporary(to.slot) ||
        !WholeSlot(*graph, from) || !IsDense(to) ||
        writers[from.slot].size() != 1 || readers[from.slot].size() != 1) {
      continue;
    }
    const int p = writers[from.slot][0];
    GraphNode& producer = graph->nodes[p];
    if (p >= static_cast<int>(c) || producer.kind != GraphNode::Kind::kLaunch ||
        Accumulates(producer)) {
      continue;
    }
    bool clear = true;
    for (const ValueRef& v : producer.inputs) {
      clear &= v.slot != to.slot && v.slot != from.slot;
    }
    // Each dense part the producer writes of the (dense, whole) source
    // lands as far into the (dense) destination.
    for (const ValueRef& v : producer.outputs) {
      clear &= v.slot != from.slot || (IsDense(v) && v.dtype == from.dtype);
    }
    // Between the two, the destination's slot is not read, and written
    // only apart from the destination (the copies of other parts).
    for (size_t k = p + 1; k < c && clear; ++k) {
      if (drop[k]) continue;
      const GraphNode& n = graph->nodes[k];
      for (const ValueRef& v : n.inputs) clear &= v.slot != to.slot;
      for (const ValueRef& v : n.outputs)
        clear &= v.slot != to.slot || Apart(v, to);
    }
    if (!clear || Elements(from) != Elements(to)) continue;
    for (ValueRef& out : producer.outputs) {
      if (out.slot != from.slot) continue;
      out.slot = to.slot;
      out.offset += to.offset;
    }
    writers[to.slot].push_back(p);
    drop[c] = true;
    ++placed;
  }
  DropNodes(graph, drop);
  return placed;
}

}  // namespace mixrt::compiler
