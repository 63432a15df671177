#include "core/compiler/graph.h"

#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "mixrt/op_names.h"

namespace mixrt::compiler {
namespace {

std::string SlotName(const Graph& g, int slot) {
  const StorageSlot& s = g.slots[slot];
  switch (s.kind) {
    case StorageSlot::Kind::kInput:
      return absl::StrCat("arg", s.input);
    case StorageSlot::Kind::kConstant:
      return absl::StrCat("const", slot);
    case StorageSlot::Kind::kInternal:
      return absl::StrCat(s.returned ? "out" : s.saved ? "saved" : "buf", slot);
    case StorageSlot::Kind::kSaved:
      return absl::StrCat("saved", s.forward_slot);
  }
  return "?";
}

std::string ValueName(const Graph& g, const ValueRef& v) {
  return absl::StrCat(SlotName(g, v.slot),
                      v.offset != 0 ? absl::StrCat("+", v.offset) : "", ":",
                      DTypeName(v.dtype), ShapeToString(v.shape));
}

}  // namespace

int64_t Elements(const ValueRef& v) {
  int64_t n = 1;
  for (int64_t d : v.shape) n *= d;
  return n;
}

bool Accumulates(const GraphNode& n) {
  if (n.op != MIXRT_OP_MATMUL) return false;
  MixrtMatmulAttrs a{};
  if (n.attrs.size() < sizeof(a)) return true;
  std::memcpy(&a, n.attrs.data(), sizeof(a));
  return a.beta != 0.0f;
}

int DropNodes(Graph* g, const std::vector<bool>& drop) {
  std::vector<GraphNode> kept;
  for (size_t i = 0; i < g->nodes.size(); ++i) {
    if (!drop[i]) kept.push_back(std::move(g->nodes[i]));
  }
  const int removed = static_cast<int>(g->nodes.size() - kept.size());
  g->nodes = std::move(kept);
  return removed;
}

std::string UnwrittenRead(const Graph& g) {
  std::vector<bool> written(g.slots.size(), false);
  auto unwritten = [&](const ValueRef& v) {
    return g.slots[v.slot].kind == StorageSlot::Kind::kInternal &&
           !written[v.slot];
  };
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const GraphNode& n = g.nodes[i];
    std::vector<ValueRef> reads = n.inputs;
    if (Accumulates(n))
      reads.insert(reads.end(), n.outputs.begin(), n.outputs.end());
    for (const ValueRef& v : reads) {
      if (unwritten(v)) {
        return absl::StrCat(
            "launch ", i, " (",
            n.kind == GraphNode::Kind::kLaunch ? MixrtOpName(n.op) : "fused",
            ") reads ", ValueName(g, v),
            ", which no earlier launch of the graph writes");
      }
    }
    for (const ValueRef& v : n.outputs) written[v.slot] = true;
  }
  for (size_t k = 0; k < g.outputs.size(); ++k) {
    if (unwritten(g.outputs[k])) {
      return absl::StrCat("result ", k, " (", ValueName(g, g.outputs[k]),
                          ") is written by no launch of the graph");
    }
  }
  return "";
}

bool IsDense(const ValueRef& v) {
  int64_t expected = 1;
  for (int d = static_cast<int>(v.shape.size()) - 1; d >= 0; --d) {
    if (v.shape[d] != 1 && v.strides[d] != expected) return false;
    expected *= v.shape[d];
  }
  return true;
}

MixrtTensorDesc Describe(const ValueRef& v) {
  MixrtTensorDesc d{};
  d.struct_size = sizeof(d);
  d.dtype = ToAbi(v.dtype);
  d.ndim = static_cast<int32_t>(v.shape.size());
  d.shape = v.shape.data();
  d.strides = v.strides.data();
  return d;
}

std::vector<std::vector<int>> SlotWriters(const Graph& g) {
  std::vector<std::vector<int>> writers(g.slots.size());
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    for (const ValueRef& v : g.nodes[i].outputs) {
      std::vector<int>& w = writers[v.slot];
      if (w.empty() || w.back() != static_cast<int>(i))
        w.push_back(static_cast<int>(i));
    }
  }
  return writers;
}

std::vector<bool> ConstantDerived(
    const Graph& g, const std::vector<std::vector<int>>& writers) {
  std::vector<bool> derived(g.slots.size(), false);
  for (size_t s = 0; s < g.slots.size(); ++s) {
    derived[s] = g.slots[s].kind == StorageSlot::Kind::kConstant;
  }
  for (const GraphNode& n : g.nodes) {
    if (n.kind != GraphNode::Kind::kLaunch) continue;
    // A random launch draws new numbers every run: never kept.
    bool from_constants =
        !n.random() &&
        (!n.inputs.empty() || n.op == MIXRT_OP_FILL || n.op == MIXRT_OP_ARANGE);
    for (const ValueRef& v : n.inputs) from_constants &= derived[v.slot];
    for (const ValueRef& v : n.outputs) {
      derived[v.slot] = from_constants && writers[v.slot].size() == 1 &&
                        g.slots[v.slot].kind == StorageSlot::Kind::kInternal;
    }
  }
  return derived;
}

std::string Graph::ToString() const {
  std::string out;
  for (const GraphNode& n : nodes) {
    std::vector<std::string> ins, outs;
    for (const ValueRef& v : n.inputs) ins.push_back(ValueName(*this, v));
    for (const ValueRef& v : n.outputs) outs.push_back(ValueName(*this, v));
    absl::StrAppend(
        &out, "  ", absl::StrJoin(outs, ", "), " = ",
        n.kind == GraphNode::Kind::kHostWrite
            ? absl::StrCat("host_write(", n.host_bytes.size(), " bytes)")
        : n.kind == GraphNode::Kind::kHostRead
            ? absl::StrCat("host_read(", absl::StrJoin(ins, ", "),
                           ") guarded on the traced value")
        : n.kind == GraphNode::Kind::kFused
            ? absl::StrCat("fused[", n.fused->kernel->description(), "](",
                           absl::StrJoin(ins, ", "), ")")
            : absl::StrCat(MixrtOpName(n.op), "(", absl::StrJoin(ins, ", "),
                           ")"),
        n.random()
            ? absl::StrCat(" random", n.random_source, "@+", n.random_offset)
            : "",
        "\n");
  }
  std::vector<std::string> results;
  for (const ValueRef& v : outputs) results.push_back(ValueName(*this, v));
  absl::StrAppend(&out, "  return ", absl::StrJoin(results, ", "), "\n");
  return out;
}

}  // namespace mixrt::compiler
