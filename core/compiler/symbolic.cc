#include "core/compiler/symbolic.h"

#include <functional>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "mixrt/op_names.h"

namespace mixrt::compiler {
namespace {

// Calls f on every integer of g that may depend on a size, in a fixed
// order: slot sizes, then each node's and each result's views.
void VisitInts(Graph& g, const std::function<void(int64_t&)>& f) {
  for (StorageSlot& s : g.slots) {
    int64_t bytes = static_cast<int64_t>(s.bytes);
    f(bytes);
    s.bytes = static_cast<uint64_t>(bytes);
  }
  auto view = [&](ValueRef& v) {
    f(v.offset);
    for (int64_t& d : v.shape) f(d);
    for (int64_t& d : v.strides) f(d);
  };
  for (GraphNode& n : g.nodes) {
    for (ValueRef& v : n.inputs) view(v);
    for (ValueRef& v : n.outputs) view(v);
    f(n.random_offset);  // Earlier draws' sizes move it.
  }
  for (ValueRef& v : g.outputs) view(v);
  for (RandomSource& r : g.random_sources) f(r.blocks);
}

std::vector<int64_t> Ints(const Graph& g) {
  Graph copy = g;
  std::vector<int64_t> out;
  VisitInts(copy, [&](int64_t& v) { out.push_back(v); });
  return out;
}

bool SameViews(const std::vector<ValueRef>& x, const std::vector<ValueRef>& y) {
  if (x.size() != y.size()) return false;
  for (size_t i = 0; i < x.size(); ++i) {
    if (x[i].slot != y[i].slot || x[i].dtype != y[i].dtype ||
        x[i].shape.size() != y[i].shape.size() ||
        x[i].strides.size() != y[i].strides.size()) {
      return false;
    }
  }
  return true;
}

// The same generators, in order.
bool SameRandomSources(const Graph& x, const Graph& y) {
  if (x.random_sources.size() != y.random_sources.size()) return false;
  for (size_t i = 0; i < x.random_sources.size(); ++i) {
    const auto& a = x.random_sources[i].state;
    const auto& b = y.random_sources[i].state;
    if (a.owner_before(b) || b.owner_before(a)) return false;
  }
  return true;
}

}  // namespace

bool SameStructure(const Graph& x, const Graph& y) {
  if (x.device != y.device || x.slots.size() != y.slots.size() ||
      x.nodes.size() != y.nodes.size() || !SameViews(x.outputs, y.outputs) ||
      !SameRandomSources(x, y)) {
    return false;
  }
  for (size_t i = 0; i < x.slots.size(); ++i) {
    const StorageSlot& a = x.slots[i];
    const StorageSlot& b = y.slots[i];
    if (a.kind != b.kind || a.input != b.input ||
        a.forward_slot != b.forward_slot || !SameConstant(a, b) ||
        a.returned != b.returned || a.saved != b.saved) {
      return false;
    }
  }
  for (size_t i = 0; i < x.nodes.size(); ++i) {
    const GraphNode& a = x.nodes[i];
    const GraphNode& b = y.nodes[i];
    if (a.kind != b.kind || a.op != b.op || a.attrs != b.attrs ||
        a.random_source != b.random_source || a.host_bytes != b.host_bytes ||
        !SameViews(a.inputs, b.inputs) || !SameViews(a.outputs, b.outputs)) {
      return false;
    }
  }
  return true;
}

std::string StructureKey(const Graph& g) {
  std::string key = absl::StrCat("device ", g.device.ToString(), "\n");
  auto views = [&](const std::vector<ValueRef>& refs) {
    for (const ValueRef& v : refs) {
      absl::StrAppend(&key, " ", v.slot, ":", DTypeName(v.dtype), ":",
                      v.shape.size(), ":", v.strides.size());
    }
  };
  for (const StorageSlot& s : g.slots) {
    absl::StrAppend(&key, "slot ", static_cast<int>(s.kind), " ", s.input, " ",
                    s.forward_slot, " ", s.parameter, " ", s.returned, " ",
                    s.saved, "\n");
  }
  for (const GraphNode& n : g.nodes) {
    absl::StrAppend(
        &key, "node ", static_cast<int>(n.kind), " ", n.op, " ",
        absl::BytesToHexString(absl::string_view(
            reinterpret_cast<const char*>(n.attrs.data()), n.attrs.size())),
        " ",
        absl::BytesToHexString(absl::string_view(
            reinterpret_cast<const char*>(n.host_bytes.data()),
            n.host_bytes.size())),
        " random ", n.random_source, " in");
    views(n.inputs);
    key += " out";
    views(n.outputs);
    key += "\n";
  }
  key += "results";
  views(g.outputs);
  // Generators by kind: the default one is the same in every process.
  for (const RandomSource& r : g.random_sources) {
    key += r.state.lock() == DefaultGenerator().state() ? "\nrandom default"
                                                        : "\nrandom own";
  }
  return key + "\n";
}

bool SameGraph(const Graph& x, const Graph& y) {
  return SameStructure(x, y) && Ints(x) == Ints(y);
}

std::string FirstDifference(const Graph& x, const Graph& y) {
  if (x.nodes.size() != y.nodes.size()) {
    return absl::StrCat("the call made ", y.nodes.size(),
                        " launches, the graph has ", x.nodes.size(),
                        " (the function took another path)");
  }
  if (x.slots.size() != y.slots.size()) {
    return absl::StrCat("the call touched ", y.slots.size(),
                        " memory slots, the graph ", x.slots.size());
  }
  for (size_t i = 0; i < x.slots.size(); ++i) {
    const StorageSlot& a = x.slots[i];
    const StorageSlot& b = y.slots[i];
    if (a.kind != b.kind || a.input != b.input || !SameConstant(a, b)) {
      return absl::StrCat(
          "slot ", i, " is other memory (",
          a.kind == StorageSlot::Kind::kConstant
              ? "the function reads another tensor than it did when traced"
              : "inputs or allocations differ",
          ")");
    }
  }
  for (size_t i = 0; i < x.nodes.size(); ++i) {
    const GraphNode& a = x.nodes[i];
    const GraphNode& b = y.nodes[i];
    const std::string name =
        absl::StrCat("node ", i, " (",
                     a.kind == GraphNode::Kind::kHostWrite  ? "host_write"
                     : a.kind == GraphNode::Kind::kHostRead ? "host_read"
                                                            : MixrtOpName(a.op),
                     ")");
    if (a.kind != b.kind || a.op != b.op) {
      return absl::StrCat(
          name, " is another op now (the function took another path)");
    }
    if (a.random_source != b.random_source) {
      return absl::StrCat(name,
                          " reads random numbers from another generator, or "
                          "now or no longer reads random numbers");
    }
    if (a.attrs != b.attrs) {
      return absl::StrCat(name,
                          ": its attributes changed (a host value the "
                          "function passes to the op, such as a scalar, "
                          "changed; pass it as a tensor)");
    }
    if (a.host_bytes != b.host_bytes) {
      return absl::StrCat(name, a.kind == GraphNode::Kind::kHostRead
                                    ? ": the value it reads changed"
                                    : ": the host data it writes changed "
                                      "(pass changing values as tensors)");
    }
    if (!SameViews(a.inputs, b.inputs) || !SameViews(a.outputs, b.outputs)) {
      return absl::StrCat(name, " reads or writes other memory");
    }
  }
  if (!SameRandomSources(x, y)) {
    return "it draws random numbers from other generators";
  }
  if (!SameGraph(x, y)) return "a shape, stride or offset differs";
  return "";
}

std::optional<SymbolicGraph> Generalize(const Graph& g1, int64_t n1,
                                        const Graph& g2, int64_t n2) {
  if (n1 == n2 || !SameStructure(g1, g2)) return std::nullopt;
  const std::vector<int64_t> v1 = Ints(g1), v2 = Ints(g2);
  SymbolicGraph s;
  s.structure = g1;
  for (size_t i = 0; i < v1.size(); ++i) {
    const int64_t d = v2[i] - v1[i];
    if (d % (n2 - n1) != 0) return std::nullopt;
    const int64_t b = d / (n2 - n1);
    s.ints.push_back({v1[i] - b * n1, b});
  }
  return s;
}

std::optional<Graph> Instantiate(const SymbolicGraph& s, int64_t n) {
  Graph g = s.structure;
  size_t k = 0;
  bool ok = true;
  VisitInts(g, [&](int64_t& v) {
    ok &= k < s.ints.size();
    if (!ok) return;
    const std::optional<int64_t> at = s.ints[k++].At(n);
    ok &= at.has_value() && *at >= 0;
    if (ok) v = *at;
  });
  if (!ok || k != s.ints.size()) return std::nullopt;
  return g;
}

}  // namespace mixrt::compiler
