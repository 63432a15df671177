#include "core/compiler/training_passes.h"

#include <cstring>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "core/compiler/launch_key.h"

namespace mixrt::compiler {
namespace {

// Whether `v` is an intermediate written once, whole, by one launch: what
// a launch may be replaced by, or replace.
bool WrittenOnceWhole(const Graph& g,
                      const std::vector<std::vector<int>>& writers,
                      const ValueRef& v) {
  const StorageSlot& slot = g.slots[v.slot];
  return slot.kind == StorageSlot::Kind::kInternal && !slot.returned &&
         writers[v.slot].size() == 1 && WholeSlot(g, v);
}

bool WrittenAfter(const std::vector<int>& writers, int node) {
  return !writers.empty() && writers.back() > node;
}

template <typename T>
bool ReadAttrs(const GraphNode& n, T* attrs) {
  if (n.attrs.size() < sizeof(T)) return false;
  std::memcpy(attrs, n.attrs.data(), sizeof(T));
  return true;
}

// A launch of `op` (unary or unary_backward) of unary kind `kind`.
bool IsUnaryOf(const GraphNode& n, MixrtOp op, MixrtUnaryKind kind) {
  MixrtPointwiseAttrs a;
  return n.kind == GraphNode::Kind::kLaunch && n.op == op && ReadAttrs(n, &a) &&
         a.kind == static_cast<uint32_t>(kind);
}

template <typename T>
std::vector<uint8_t> AttrBytes(const T& attrs) {
  std::vector<uint8_t> bytes(sizeof(T));
  std::memcpy(bytes.data(), &attrs, sizeof(T));
  return bytes;
}

// Per forward slot, the backward's (node, input) reads of it through a
// saved view; input -1 where the backward writes it.
std::vector<std::vector<std::pair<int, int>>> SavedReads(
    const Graph& forward, const Graph& backward) {
  std::vector<std::vector<std::pair<int, int>>> reads(forward.slots.size());
  for (size_t j = 0; j < backward.nodes.size(); ++j) {
    const GraphNode& n = backward.nodes[j];
    for (size_t k = 0; k < n.inputs.size(); ++k) {
      const StorageSlot& slot = backward.slots[n.inputs[k].slot];
      if (slot.kind == StorageSlot::Kind::kSaved) {
        reads[slot.forward_slot].push_back(
            {static_cast<int>(j), static_cast<int>(k)});
      }
    }
    for (const ValueRef& v : n.outputs) {
      const StorageSlot& slot = backward.slots[v.slot];
      if (slot.kind == StorageSlot::Kind::kSaved) {
        reads[slot.forward_slot].push_back({static_cast<int>(j), -1});
      }
    }
  }
  return reads;
}

bool SameView(const ValueRef& a, const ValueRef& b) {
  return a.slot == b.slot && a.offset == b.offset && a.dtype == b.dtype &&
         a.shape == b.shape && a.strides == b.strides;
}

}  // namespace

int ReuseForwardResults(Graph* forward, Graph* backward) {
  const std::vector<std::vector<int>> fwd_writers = SlotWriters(*forward);
  const std::vector<bool> fwd_constant = ConstantDerived(*forward, fwd_writers);
  // The forward's launches by key, with the forward's own slot numbers.
  absl::flat_hash_map<std::string, int> fwd_launch;
  for (size_t i = 0; i < forward->nodes.size(); ++i) {
    const GraphNode& n = forward->nodes[i];
    if (n.kind != GraphNode::Kind::kLaunch) continue;
    bool outputs_single = true;
    for (const ValueRef& v : n.outputs) {
      outputs_single &= WrittenOnceWhole(*forward, fwd_writers, v);
    }
    bool inputs_final =
        true;  // What the launch read is what the call ends with.
    for (const ValueRef& v : n.inputs) {
      inputs_final &= !WrittenAfter(fwd_writers[v.slot], static_cast<int>(i));
    }
    if (!outputs_single || !inputs_final) continue;
    fwd_launch.try_emplace(
        LaunchKey(*forward, n, [](int slot) -> int64_t { return slot; }),
        static_cast<int>(i));
  }
  absl::flat_hash_map<const Storage*, int> fwd_constant_slot;
  for (size_t s = 0; s < forward->slots.size(); ++s) {
    const StorageSlot& slot = forward->slots[s];
    if (slot.kind == StorageSlot::Kind::kConstant) {
      fwd_constant_slot.try_emplace(slot.constant.lock().get(),
                                    static_cast<int>(s));
    }
  }
  const std::vector<std::vector<int>> bwd_writers = SlotWriters(*backward);
  // Per backward slot, the forward slot holding the same values, or -1.
  std::vector<int> same_as(backward->slots.size(), -1);
  for (size_t s = 0; s < backward->slots.size(); ++s) {
    const StorageSlot& slot = backward->slots[s];
    if (!bwd_writers[s].empty()) continue;  // Written by the backward.
    if (slot.kind == StorageSlot::Kind::kSaved) {
      same_as[s] = slot.forward_slot;
    } else if (slot.kind == StorageSlot::Kind::kConstant) {
      const auto it = fwd_constant_slot.find(slot.constant.lock().get());
      if (it != fwd_constant_slot.end()) same_as[s] = it->second;
    }
  }
  // One backward view per forward slot: a plan lets go of a saved slot
  // after the last launch reading that view.
  std::vector<int> view_of(forward->slots.size(), -1);
  for (size_t s = 0; s < backward->slots.size(); ++s) {
    const StorageSlot& slot = backward->slots[s];
    if (slot.kind == StorageSlot::Kind::kSaved)
      view_of[slot.forward_slot] = static_cast<int>(s);
  }
  std::vector<int> renamed(backward->slots.size(), -1);
  std::vector<bool> converted(backward->slots.size(), false);
  std::vector<bool> drop(backward->nodes.size(), false);
  int reused = 0;
  for (size_t j = 0; j < backward->nodes.size(); ++j) {
    const GraphNode& n = backward->nodes[j];
    if (n.kind != GraphNode::Kind::kLaunch) continue;
    bool matchable = true;
    for (const ValueRef& v : n.inputs) matchable &= same_as[v.slot] >= 0;
    for (const ValueRef& v : n.outputs) {
      matchable &= WrittenOnceWhole(*backward, bwd_writers, v);
    }
    if (!matchable) continue;
    const auto it = fwd_launch.find(LaunchKey(
        *backward, n, [&](int slot) -> int64_t { return same_as[slot]; }));
    if (it == fwd_launch.end()) continue;
    const GraphNode& f = forward->nodes[it->second];
    bool on_constants = true;
    for (const ValueRef& v : f.inputs) on_constants &= fwd_constant[v.slot];
    for (size_t k = 0; k < n.outputs.size(); ++k) {
      same_as[n.outputs[k].slot] = f.outputs[k].slot;
    }
    // A launch on constants stays: its plan keeps the result between runs
    // (the forward's, saved, would be fresh memory every run instead); it
    // still lets later launches on its result match.
    if (on_constants) continue;
    for (size_t k = 0; k < n.outputs.size(); ++k) {
      const int fs = f.outputs[k].slot, bs = n.outputs[k].slot;
      forward->slots[fs].saved = true;
      if (view_of[fs] >= 0) {
        renamed[bs] = view_of[fs];
        backward->slots[bs] = StorageSlot{};  // Unused from now on.
      } else {
        converted[bs] = true;
        backward->slots[bs].kind = StorageSlot::Kind::kSaved;
        backward->slots[bs].forward_slot = fs;
        view_of[fs] = bs;
      }
    }
    drop[j] = true;
    ++reused;
  }
  std::vector<GraphNode> kept;
  for (size_t j = 0; j < backward->nodes.size(); ++j) {
    if (drop[j]) continue;
    for (ValueRef& v : backward->nodes[j].inputs) {
      if (renamed[v.slot] >= 0) v.slot = renamed[v.slot];
    }
    kept.push_back(std::move(backward->nodes[j]));
  }
  for (ValueRef& v : backward->outputs) {
    if (renamed[v.slot] >= 0) v.slot = renamed[v.slot];
  }
  backward->nodes = std::move(kept);
  // A result only a dropped launch read (the count's compare, when the
  // count itself is reused) need not be saved after all.
  std::vector<bool> read(backward->slots.size(), false);
  for (const GraphNode& n : backward->nodes) {
    for (const ValueRef& v : n.inputs) read[v.slot] = true;
  }
  for (const ValueRef& v : backward->outputs) read[v.slot] = true;
  for (size_t s = 0; s < backward->slots.size(); ++s) {
    StorageSlot& slot = backward->slots[s];
    if (slot.kind == StorageSlot::Kind::kSaved && !read[s] && converted[s]) {
      forward->slots[slot.forward_slot].saved = false;
      slot = StorageSlot{};
    }
  }
  return reused;
}

int FuseMatmulRelu(
    Graph* forward, Graph* backward,
    absl::FunctionRef<bool(const GraphNode& matmul)> runs_fused) {
  const std::vector<std::vector<int>> writers = SlotWriters(*forward);
  std::vector<std::vector<int>> readers(forward->slots.size());
  for (size_t i = 0; i < forward->nodes.size(); ++i) {
    for (const ValueRef& v : forward->nodes[i].inputs) {
      readers[v.slot].push_back(static_cast<int>(i));
    }
  }
  std::vector<bool> returned(forward->slots.size(), false);
  for (const ValueRef& v : forward->outputs) returned[v.slot] = true;
  // The backward's views of each forward slot, and which of its nodes read
  // them (a write, input -1, leaves that slot alone).
  std::vector<std::vector<int>> saved_views(forward->slots.size());
  std::vector<std::vector<std::pair<int, int>>> saved_reads(
      forward->slots.size());
  if (backward != nullptr) {
    for (size_t s = 0; s < backward->slots.size(); ++s) {
      const StorageSlot& slot = backward->slots[s];
      if (slot.kind == StorageSlot::Kind::kSaved) {
        saved_views[slot.forward_slot].push_back(static_cast<int>(s));
      }
    }
    saved_reads = SavedReads(*forward, *backward);
  }
  std::vector<bool> drop(forward->nodes.size(), false);
  int fused = 0;
  for (size_t i = 0; i < forward->nodes.size(); ++i) {
    GraphNode& m = forward->nodes[i];
    MixrtMatmulAttrs attrs;
    if (m.kind != GraphNode::Kind::kLaunch || m.op != MIXRT_OP_MATMUL ||
        !ReadAttrs(m, &attrs) || attrs.activation != MIXRT_ACTIVATION_NONE ||
        attrs.beta != 0) {
      continue;
    }
    const ValueRef& product = m.outputs[0];
    const int a = product.slot;
    if (!WrittenOnceWhole(*forward, writers, product) || returned[a] ||
        readers[a].size() != 1) {
      continue;
    }
    const int u = readers[a][0];
    GraphNode& relu = forward->nodes[u];
    if (!IsUnaryOf(relu, MIXRT_OP_UNARY, MIXRT_UNARY_RELU) ||
        !SameView(relu.inputs[0], product)) {
      continue;
    }
    const ValueRef& result = relu.outputs[0];
    // Into an intermediate of its own: an in-place relu on an input or a
    // weight the product may read stays a launch of its own.
    if (forward->slots[result.slot].kind != StorageSlot::Kind::kInternal)
      continue;
    if (result.dtype != product.dtype || result.shape != product.shape ||
        result.strides != product.strides || writers[result.slot].size() != 1 ||
        !WholeSlot(*forward, result) || !runs_fused(m)) {
      continue;
    }
    // Every backward read of the product must be a relu gradient's x.
    bool backward_fits = true;
    for (const auto& [node, input] : saved_reads[a]) {
      if (input != 1 || !IsUnaryOf(backward->nodes[node],
                                   MIXRT_OP_UNARY_BACKWARD, MIXRT_UNARY_RELU)) {
        backward_fits = false;
        break;
      }
    }
    if (!backward_fits) continue;
    if (backward != nullptr && !saved_views[a].empty()) {
      // Read the relu's result through the backward's existing view of it
      // (one backward slot per forward slot: a plan frees a saved slot
      // after its last reader), or retarget the product's view.
      int view =
          saved_views[result.slot].empty() ? -1 : saved_views[result.slot][0];
      if (view < 0) {
        view = saved_views[a][0];
        backward->slots[view].forward_slot = result.slot;
      }
      for (const auto& [node, input] : saved_reads[a]) {
        backward->nodes[node].inputs[input].slot = view;
      }
      for (int other : saved_views[a]) {
        if (other != view)
          backward->slots[other] = StorageSlot{};  // Unused now.
      }
      forward->slots[result.slot].saved = true;
      forward->slots[a].saved = false;
    }
    attrs.activation = MIXRT_ACTIVATION_RELU;
    std::memcpy(m.attrs.data(), &attrs, sizeof(attrs));
    m.outputs[0] = result;
    drop[u] = true;
    ++fused;
  }
  DropNodes(forward, drop);
  return fused;
}

int SaveGeluDerivatives(Graph* forward, Graph* backward, bool fuses_pair) {
  if (backward == nullptr || !fuses_pair) return 0;
  const std::vector<std::vector<int>> writers = SlotWriters(*forward);
  const std::vector<std::vector<std::pair<int, int>>> saved_reads =
      SavedReads(*forward, *backward);
  // Per forward node, the launches to run right after it.
  std::vector<std::vector<GraphNode>> after(forward->nodes.size());
  int saved = 0;
  for (size_t i = 0; i < forward->nodes.size(); ++i) {
    const GraphNode& gelu = forward->nodes[i];
    if (!IsUnaryOf(gelu, MIXRT_OP_UNARY, MIXRT_UNARY_GELU)) continue;
    const ValueRef x = gelu.inputs[0];
    const StorageSlot x_slot = forward->slots[x.slot];  // Slots grow below.
    if (!x_slot.saved || !WrittenOnceWhole(*forward, writers, x) ||
        !IsDense(x) || !IsFloating(x.dtype) || saved_reads[x.slot].empty()) {
      continue;
    }
    bool only_gradients = true;
    for (const auto& [node, input] : saved_reads[x.slot]) {
      only_gradients &=
          input == 1 && IsUnaryOf(backward->nodes[node],
                                  MIXRT_OP_UNARY_BACKWARD, MIXRT_UNARY_GELU);
    }
    if (!only_gradients) continue;
    // ones and the derivative: dense slots laid out as x's.
    auto add_slot = [&](bool keep_for_backward) {
      StorageSlot slot;
      slot.bytes = x_slot.bytes;
      slot.saved = keep_for_backward;
      forward->slots.push_back(slot);
      ValueRef v = x;
      v.slot = static_cast<int>(forward->slots.size() - 1);
      return v;
    };
    const ValueRef ones = add_slot(false);
    const ValueRef derivative = add_slot(true);
    GraphNode fill;
    fill.op = MIXRT_OP_FILL;
    MixrtScalarAttrs one{};
    one.struct_size = sizeof(one);
    one.value = 1.0;
    fill.attrs = AttrBytes(one);
    fill.outputs = {ones};
    GraphNode slope;
    slope.op = MIXRT_OP_UNARY_BACKWARD;
    slope.attrs = gelu.attrs;
    slope.inputs = {ones, x};
    slope.outputs = {derivative};
    after[i].push_back(std::move(fill));
    after[i].push_back(std::move(slope));
    // g * gelu'(x) is g times the derivative, read where the backward read
    // x (its views keep their offsets: the layout is x's).
    MixrtPointwiseAttrs mul{};
    mul.struct_size = sizeof(mul);
    mul.kind = MIXRT_BINARY_MUL;
    for (const auto& [node, input] : saved_reads[x.slot]) {
      GraphNode& grad = backward->nodes[node];
      grad.op = MIXRT_OP_BINARY;
      grad.attrs = AttrBytes(mul);
    }
    for (StorageSlot& slot : backward->slots) {
      if (slot.kind == StorageSlot::Kind::kSaved &&
          slot.forward_slot == x.slot) {
        slot.forward_slot = derivative.slot;
      }
    }
    forward->slots[x.slot].saved = false;
    ++saved;
  }
  if (saved == 0) return 0;
  std::vector<GraphNode> nodes;
  for (size_t i = 0; i < forward->nodes.size(); ++i) {
    nodes.push_back(std::move(forward->nodes[i]));
    for (GraphNode& n : after[i]) nodes.push_back(std::move(n));
  }
  forward->nodes = std::move(nodes);
  return saved;
}

}  // namespace mixrt::compiler
