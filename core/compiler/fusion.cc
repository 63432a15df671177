#include "core/compiler/fusion.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <map>
#include <queue>
#include <tuple>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "core/compiler/artifact_cache.h"
#include "core/compiler/fusion_check.h"
#include "core/compiler/fusion_timing.h"
#include "core/compiler/launch_key.h"
#include "mixrt/op_names.h"
#include "mixrt/status_macros.h"

namespace mixrt::compiler {
namespace {

constexpr uint64_t kTimingVersion = ~uint64_t{0};

// The fusion subgraph in ABI form, with the storage its pointers point into.
struct Offer {
  std::vector<int> node_of;    // Per fusion node: the graph node.
  std::vector<ValueRef> refs;  // Per value.
  std::vector<int> producer;   // Per value: fusion node writing it, or -1.
  std::vector<std::vector<int>> readers;  // Per value, views' readers included.
  std::vector<std::vector<int32_t>> inputs, outputs;  // Per fusion node.
  std::vector<MixrtFusionValue> values;
  std::vector<MixrtFusionNode> nodes;
  MixrtFusionGraph graph{};
};

// A view whose elements are its base's, in order (a reshape): a group
// writing the base may hand it to the reader without memory
// (plugin_api.h), so reading it does not make the group store the base.
// Offers are per size: every dim is static.
bool PlainReshape(const ValueRef& view, const ValueRef& base) {
  return view.offset == base.offset && view.dtype == base.dtype &&
         IsDense(view) && IsDense(base) && Elements(view) == Elements(base);
}

// Launches that write whole intermediates no other node writes, from inputs
// written (if at all) once, earlier: each value then has one meaning, which
// the ABI's subgraph requires. Launches on constants alone stay with the
// plan, which keeps their results between runs.
std::vector<bool> Offerable(const Graph& g) {
  const std::vector<std::vector<int>> writers = SlotWriters(g);
  const std::vector<bool> constant = ConstantDerived(g, writers);
  std::vector<bool> offer(g.nodes.size(), false);
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const GraphNode& n = g.nodes[i];
    // A random launch takes new attributes every run, which a compiled
    // fused kernel could not.
    if (n.kind != GraphNode::Kind::kLaunch || n.outputs.empty() ||
        Accumulates(n) || n.random()) {
      continue;
    }
    bool ok = true;
    for (const ValueRef& v : n.outputs) {
      ok &= g.slots[v.slot].kind == StorageSlot::Kind::kInternal &&
            writers[v.slot].size() == 1 && WholeSlot(g, v) && !constant[v.slot];
    }
    for (const ValueRef& v : n.inputs) {
      const std::vector<int>& w = writers[v.slot];
      ok &= w.empty() || (w.size() == 1 && w[0] < static_cast<int>(i));
    }
    offer[i] = ok;
  }
  return offer;
}

void BuildOffer(const Graph& g, const std::vector<bool>& offerable, Offer* o) {
  using Key =
      std::tuple<int, int64_t, int, std::vector<int64_t>, std::vector<int64_t>>;
  auto key = [](const ValueRef& v) {
    return Key{v.slot, v.offset, static_cast<int>(v.dtype),
               std::vector<int64_t>(v.shape.begin(), v.shape.end()),
               std::vector<int64_t>(v.strides.begin(), v.strides.end())};
  };
  std::map<Key, int> value_of;
  std::vector<int> produced(g.slots.size(), -1);  // Per slot: its value.
  // Parameters, and what the plan computes from them alone and keeps
  // between runs (autocast's bf16 copy of a weight): WEIGHT values, whose
  // versions the plan tells the kernels reading them.
  const std::vector<bool> constant = ConstantDerived(g, SlotWriters(g));
  auto kept = [&g](int slot) {
    const StorageSlot& s = g.slots[slot];
    return s.kind == StorageSlot::Kind::kConstant || (!s.returned && !s.saved);
  };
  std::vector<uint32_t> flags;
  std::vector<int> view_of;
  auto add = [&](const ValueRef& v, uint32_t f, int base) {
    o->refs.push_back(v);
    flags.push_back(f);
    view_of.push_back(base);
    o->producer.push_back(-1);
    o->readers.emplace_back();
    return static_cast<int>(o->refs.size() - 1);
  };
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    if (!offerable[i]) continue;
    const int f = static_cast<int>(o->node_of.size());
    o->node_of.push_back(static_cast<int>(i));
    const GraphNode& n = g.nodes[i];
    std::vector<int32_t> ins, outs;
    for (const ValueRef& v : n.inputs) {
      auto [it, fresh] = value_of.try_emplace(key(v), -1);
      if (fresh) {
        const int base = produced[v.slot];
        const bool weight = constant[v.slot] && kept(v.slot);
        it->second = base >= 0
                         ? add(v, 0, base)
                         : add(v,
                               MIXRT_FUSION_VALUE_INPUT |
                                   (weight ? MIXRT_FUSION_VALUE_WEIGHT : 0u),
                               -1);
      }
      const int value = it->second;
      ins.push_back(value);
      o->readers[value].push_back(f);
      if (view_of[value] >= 0) o->readers[view_of[value]].push_back(f);
    }
    for (const ValueRef& v : n.outputs) {
      const int value = add(v, 0, -1);
      value_of[key(v)] = value;
      produced[v.slot] = value;
      o->producer[value] = f;
      outs.push_back(value);
    }
    o->inputs.push_back(std::move(ins));
    o->outputs.push_back(std::move(outs));
  }
  // Read after the subgraph: results, saved activations, what a launch
  // not offered reads.
  std::vector<bool> read_outside(g.slots.size(), false);
  for (const ValueRef& v : g.outputs) read_outside[v.slot] = true;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    if (offerable[i]) continue;
    for (const ValueRef& v : g.nodes[i].inputs) read_outside[v.slot] = true;
  }
  for (size_t v = 0; v < o->refs.size(); ++v) {
    if (o->producer[v] < 0) continue;
    const StorageSlot& slot = g.slots[o->refs[v].slot];
    if (slot.returned || slot.saved || read_outside[o->refs[v].slot]) {
      flags[v] |= MIXRT_FUSION_VALUE_OUTPUT;
    }
  }
  for (size_t v = 0; v < o->refs.size(); ++v) {
    MixrtFusionValue value{};
    value.struct_size = sizeof(value);
    value.desc = Describe(o->refs[v]);
    value.flags = flags[v];
    value.view_of = view_of[v];
    value.view_offset =
        view_of[v] >= 0 ? o->refs[v].offset - o->refs[view_of[v]].offset : 0;
    o->values.push_back(value);
  }
  for (size_t f = 0; f < o->node_of.size(); ++f) {
    const GraphNode& n = g.nodes[o->node_of[f]];
    MixrtFusionNode node{};
    node.struct_size = sizeof(node);
    node.op = n.op;
    node.attrs = n.attrs.empty() ? nullptr : n.attrs.data();
    node.num_inputs = static_cast<int32_t>(o->inputs[f].size());
    node.inputs = o->inputs[f].data();
    node.num_outputs = static_cast<int32_t>(o->outputs[f].size());
    node.outputs = o->outputs[f].data();
    o->nodes.push_back(node);
  }
  o->graph.struct_size = sizeof(o->graph);
  o->graph.num_values = static_cast<int32_t>(o->values.size());
  o->graph.values = o->values.data();
  o->graph.num_nodes = static_cast<int32_t>(o->nodes.size());
  o->graph.nodes = o->nodes.data();
  o->graph.num_symbols = 0;  // Plans are per size: every dim is static.
}

// Per graph node, the nodes that must run after it: a later node touching
// a slot it wrote, or writing a slot it read. A host read is a barrier:
// what ran before it runs before it, what ran after it after it (a replay
// that finds another value stops there, before any later effect).
std::vector<std::vector<int>> Successors(const Graph& g) {
  std::vector<std::vector<int>> next(g.nodes.size());
  for (size_t h = 0; h < g.nodes.size(); ++h) {
    if (g.nodes[h].kind != GraphNode::Kind::kHostRead) continue;
    for (size_t i = 0; i < g.nodes.size(); ++i) {
      if (i < h) next[i].push_back(static_cast<int>(h));
      if (i > h) next[h].push_back(static_cast<int>(i));
    }
  }
  std::vector<int> last_writer(g.slots.size(), -1);
  std::vector<std::vector<int>> readers_since(g.slots.size());
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const int b = static_cast<int>(i);
    for (const ValueRef& v : g.nodes[i].inputs) {
      if (last_writer[v.slot] >= 0 && last_writer[v.slot] != b) {
        next[last_writer[v.slot]].push_back(b);
      }
      readers_since[v.slot].push_back(b);
    }
    for (const ValueRef& v : g.nodes[i].outputs) {
      if (last_writer[v.slot] >= 0 && last_writer[v.slot] != b) {
        next[last_writer[v.slot]].push_back(b);
      }
      for (int r : readers_since[v.slot]) {
        if (r != b) next[r].push_back(b);
      }
      readers_since[v.slot].clear();
      last_writer[v.slot] = b;
    }
  }
  return next;
}

// The nodes of group `group` that a path from the group through a node
// outside it reaches: none when the group runs in one place of the order.
std::vector<int> Reentered(const std::vector<std::vector<int>>& next,
                           const std::vector<int>& group_of, int group) {
  std::vector<bool> seen(next.size(), false);
  std::vector<int> stack, reached;
  for (size_t i = 0; i < next.size(); ++i) {
    if (group_of[i] != group) continue;
    for (int s : next[i]) {
      if (group_of[s] != group && !seen[s]) {
        seen[s] = true;
        stack.push_back(s);
      }
    }
  }
  while (!stack.empty()) {
    const int x = stack.back();
    stack.pop_back();
    if (group_of[x] == group) reached.push_back(x);
    for (int s : next[x]) {
      if (!seen[s]) {
        seen[s] = true;
        stack.push_back(s);
      }
    }
  }
  return reached;
}

// The units (a group, or a node of none) in an order respecting `next`,
// earliest original node first among the ready ones; empty on a cycle.
std::vector<std::vector<int>> OrderUnits(
    const std::vector<std::vector<int>>& next,
    const std::vector<int>& group_of) {
  const int n = static_cast<int>(next.size());
  std::vector<int> unit_of(n);
  std::vector<std::vector<int>> members;
  absl::flat_hash_map<int, int> unit_of_group;
  for (int i = 0; i < n; ++i) {
    if (group_of[i] >= 0) {
      auto [it, fresh] = unit_of_group.try_emplace(group_of[i], members.size());
      if (fresh) members.emplace_back();
      unit_of[i] = it->second;
    } else {
      unit_of[i] = static_cast<int>(members.size());
      members.emplace_back();
    }
    members[unit_of[i]].push_back(i);
  }
  const int units = static_cast<int>(members.size());
  std::vector<int> pending(units, 0);
  std::vector<std::vector<int>> unit_next(units);
  for (int i = 0; i < n; ++i) {
    for (int s : next[i]) {
      if (unit_of[s] == unit_of[i]) continue;
      unit_next[unit_of[i]].push_back(unit_of[s]);
      ++pending[unit_of[s]];
    }
  }
  using Ready = std::pair<int, int>;  // (first node, unit)
  std::priority_queue<Ready, std::vector<Ready>, std::greater<Ready>> ready;
  for (int u = 0; u < units; ++u) {
    if (pending[u] == 0) ready.push({members[u].front(), u});
  }
  std::vector<std::vector<int>> order;
  while (!ready.empty()) {
    const int u = ready.top().second;
    ready.pop();
    order.push_back(members[u]);
    for (int s : unit_next[u]) {
      if (--pending[s] == 0) ready.push({members[s].front(), s});
    }
  }
  if (static_cast<int>(order.size()) != units) order.clear();
  return order;
}

// One FuseWithBackend call: its phases, in the order Run calls them.
class Fusion {
 public:
  Fusion(const Graph& g, bool time_groups)
      : g_(g), device_(g.device), time_groups_(time_groups) {}

  absl::StatusOr<FusionOutcome> Run(Graph* fused_graph) {
    if (!MakeOffer() || !Claim()) return std::move(outcome_);
    MakeConvex();
    const std::vector<std::vector<int>> order = OrderUnits(next_, group_of_);
    if (order.empty()) {
      RefuseAll("the groups depend on each other in a cycle");
      return std::move(outcome_);
    }
    MIXRT_RETURN_IF_ERROR(CompileGroups());
    if (std::any_of(fused_.begin(), fused_.end(),
                    [](const auto& f) { return f != nullptr; })) {
      Splice(order, fused_graph);
    }
    return std::move(outcome_);
  }

 private:
  // The launches that write an intermediate once, as the plugin's graph;
  // false (with the reason in the outcome) when there is nothing to offer.
  bool MakeOffer() {
    if (!device_.valid() || !device_.backend()->has_fusion()) {
      outcome_.not_offered =
          device_.valid() ? absl::StrCat(device_.backend()->name(),
                                         " fuses nothing (no fusion_claim)")
                          : "no device";
      return false;
    }
    BuildOffer(g_, Offerable(g_), &offer_);
    outcome_.offered = static_cast<int>(offer_.node_of.size());
    if (offer_.node_of.empty()) {
      outcome_.not_offered = "no launch writes an intermediate once";
      return false;
    }
    return true;
  }

  // The plugin's groups, numbered densely in order of first appearance
  // (its numbers may be sparse, group 2^31 - 1 of one node, and per-group
  // tables are sized by the count); false when it claims none.
  bool Claim() {
    absl::StatusOr<std::vector<int32_t>> claim =
        device_.backend()->ClaimFusion(device_.index(), offer_.graph);
    if (!claim.ok()) {
      // The plugin's failure, not the call's: the graph runs op by op, as
      // it does when a group's compile fails.
      outcome_.not_offered =
          absl::StrCat("its fusion claim failed (", claim.status().message(),
                       "): the graph runs op by op");
      return false;
    }
    claimed_ = *std::move(claim);
    absl::flat_hash_map<int32_t, int32_t> dense;
    for (int32_t& x : claimed_) {
      if (x < 0) continue;
      x = dense.try_emplace(x, static_cast<int32_t>(dense.size()))
              .first->second;
    }
    group_of_.assign(g_.nodes.size(), -1);
    for (size_t f = 0; f < claimed_.size(); ++f) {
      group_of_[offer_.node_of[f]] = claimed_[f];
      num_groups_ = std::max(num_groups_, claimed_[f] + 1);
    }
    if (num_groups_ == 0) return false;
    next_ = Successors(g_);
    return true;
  }

  // A group a path leaves and re-enters runs in no one place of the order.
  // The path goes through a node the plugin was not offered (it could not
  // see it), so the group splits instead of being refused: the nodes no
  // such path reaches stay (convex: a path into them would reach them
  // too), the rest become a group of their own, split again as needed.
  // A piece of one node runs op by op: it fuses nothing.
  void MakeConvex() {
    std::vector<int> offered_as(g_.nodes.size(), -1);
    for (size_t f = 0; f < offer_.node_of.size(); ++f) {
      offered_as[offer_.node_of[f]] = static_cast<int>(f);
    }
    std::vector<bool> split(num_groups_, false);
    for (int group = 0; group < num_groups_; ++group) {
      const std::vector<int> later = Reentered(next_, group_of_, group);
      if (later.empty()) continue;
      for (int i : later) {
        group_of_[i] = num_groups_;
        claimed_[offered_as[i]] = num_groups_;
      }
      split[group] = true;
      split.push_back(true);
      ++num_groups_;
      --group;  // The rest is convex; this checks it again.
    }
    for (int group = 0; group < num_groups_; ++group) {
      if (split[group] && Size(group) == 1) Unclaim(group);
    }
  }

  // Each group compiled by the plugin, checked and timed where asked;
  // fused_[group] stays null for a group refused (the reason in the
  // outcome: its nodes run op by op).
  absl::Status CompileGroups() {
    const bool checked = ChecksFusionOf(*device_.backend());
    fused_.assign(num_groups_, nullptr);
    for (int group = 0; group < num_groups_; ++group) {
      if (Size(group) == 0) continue;
      absl::StatusOr<std::unique_ptr<PluginFusedKernel>> kernel =
          device_.backend()->CompileFusion(device_.index(), offer_.graph,
                                           claimed_, group);
      if (!kernel.ok()) {
        Refuse(group, std::string(kernel.status().message()));
        continue;
      }
      auto f = std::make_shared<FusedGroup>();
      f->kernel = *std::move(kernel);
      const std::vector<bool> store = DescribeValues(group, f.get());
      std::vector<int> nodes;  // The group's launches in g.
      for (size_t node = 0; node < offer_.node_of.size(); ++node) {
        if (claimed_[node] == group) nodes.push_back(offer_.node_of[node]);
      }
      if (time_groups_ || checked) {
        // A weight told a version no run sees (versions count up from 0):
        // the kernel prepares from it once for the check and the timing,
        // and again when the plan tells the real one.
        for (const auto& [input, value] : f->weights) {
          MIXRT_RETURN_IF_ERROR(
              f->kernel->SetWeightVersion(value, kTimingVersion).status());
        }
      }
      if (checked && !CheckAgainstLaunches(group, nodes, f.get())) continue;
      if (time_groups_ && !TimeAgainstLaunches(group, nodes, store, f.get()))
        continue;
      fused_[group] = std::move(f);
    }
    return absl::OkStatus();
  }

  // The group's node described as the values it reads from outside and the
  // ones it stores (what the ABI says it must); per value, whether stored.
  std::vector<bool> DescribeValues(int group, FusedGroup* f) const {
    f->num_values = static_cast<int>(offer_.refs.size());
    std::vector<bool> input(offer_.refs.size(), false),
        store(offer_.refs.size(), false);
    for (size_t node = 0; node < offer_.node_of.size(); ++node) {
      if (claimed_[node] != group) continue;
      ++f->launches;
      for (int v : offer_.inputs[node]) {
        const int base =
            offer_.values[v].view_of >= 0 ? offer_.values[v].view_of : v;
        if (offer_.producer[base] < 0 ||
            claimed_[offer_.producer[base]] != group) {
          input[v] = true;
        } else if (base != v &&
                   !PlainReshape(offer_.refs[v], offer_.refs[base])) {
          store[base] = true;  // Read through a view: it needs memory.
        }
      }
      for (int v : offer_.outputs[node]) {
        store[v] = store[v] ||
                   (offer_.values[v].flags & MIXRT_FUSION_VALUE_OUTPUT) != 0;
        for (int r : offer_.readers[v])
          store[v] = store[v] || claimed_[r] != group;
      }
    }
    for (size_t v = 0; v < offer_.refs.size(); ++v) {
      if (input[v]) {
        if ((offer_.values[v].flags & MIXRT_FUSION_VALUE_WEIGHT) != 0) {
          f->weights.emplace_back(static_cast<int>(f->input_values.size()),
                                  static_cast<int>(v));
        }
        f->input_values.push_back(static_cast<int>(v));
      }
      if (store[v]) f->output_values.push_back(static_cast<int>(v));
    }
    return store;
  }

  // The kernel run beside the launches it replaces (fusion_check.h); false
  // when it disagrees or the check fails (the group refused).
  bool CheckAgainstLaunches(int group, const std::vector<int>& nodes,
                            FusedGroup* f) {
    absl::StatusOr<std::string> wrong = CheckFusedGroup(
        g_, nodes, *f->kernel, offer_.refs, f->input_values, f->output_values);
    const std::string why =
        !wrong.ok() ? absl::StrCat("checking it against its launches failed: ",
                                   wrong.status().message())
        : !wrong->empty() ? absl::StrCat("dropped: ", *wrong)
                          : "";
    if (!why.empty()) {
      std::fprintf(stderr,
                   "mixrt::compile: %s's fused kernel %s runs op by op: %s\n",
                   device_.backend()->name().c_str(),
                   f->kernel->description().c_str(), why.c_str());
      Refuse(group, why);
      return false;
    }
    f->timing = " [checked against its launches]";
    return true;
  }

  // The kernel timed against its launches (once per graph and backend
  // build: a later process or trace reads the decision from the compile
  // cache); false when it loses or the timing fails (the group refused).
  bool TimeAgainstLaunches(int group, const std::vector<int>& nodes,
                           const std::vector<bool>& store, FusedGroup* f) {
    std::vector<int> values = f->input_values;
    values.insert(values.end(), f->output_values.begin(),
                  f->output_values.end());
    const std::string key =
        FusionTimingKey(g_, nodes, f->kernel->description());
    std::string why;
    const std::optional<std::string> stored =
        ArtifactCache::Global().Load(key, &why);
    std::optional<FusionTiming> cached;
    if (stored.has_value()) cached = ParseFusionTiming(*stored);
    absl::StatusOr<FusionTiming> t =
        cached.has_value()
            ? *cached
            : TimeFusedGroup(g_, nodes, *f->kernel, offer_.refs, values);
    if (!t.ok()) {
      Refuse(group, absl::StrCat("timing it failed: ", t.status().message()));
      return false;
    }
    if (!cached.has_value())
      ArtifactCache::Global().Store(key, FormatFusionTiming(*t));
    const char* source =
        cached.has_value() ? ", timed by an earlier compile" : "";
    int64_t bytes_not_stored = 0;
    for (size_t node = 0; node < offer_.node_of.size(); ++node) {
      if (claimed_[node] != group) continue;
      for (int v : offer_.outputs[node]) {
        if (store[v]) continue;
        bytes_not_stored +=
            Elements(offer_.refs[v]) *
            static_cast<int64_t>(DTypeSize(offer_.refs[v].dtype));
      }
    }
    const FusionVerdict verdict =
        JudgeFusedGroup(*t, f->launches, bytes_not_stored, source);
    if (!verdict.keep) {
      Refuse(group, verdict.note);
      return false;
    }
    f->timing += verdict.note;
    return true;
  }

  // The graph with each fused group as one node where its unit falls in
  // the order.
  void Splice(const std::vector<std::vector<int>>& order, Graph* fused_graph) {
    std::vector<GraphNode> nodes;
    for (const std::vector<int>& unit : order) {
      const int group = group_of_[unit.front()];
      if (group < 0 || fused_[group] == nullptr) {
        for (int i : unit) nodes.push_back(g_.nodes[i]);
        continue;
      }
      GraphNode n;
      n.kind = GraphNode::Kind::kFused;
      n.op = MIXRT_OP_COUNT;
      for (int v : fused_[group]->input_values)
        n.inputs.push_back(offer_.refs[v]);
      for (int v : fused_[group]->output_values)
        n.outputs.push_back(offer_.refs[v]);
      outcome_.kernels.push_back(absl::StrCat(
          fused_[group]->kernel->description(), fused_[group]->timing));
      outcome_.launches += fused_[group]->launches;
      ++outcome_.groups;
      n.fused = std::move(fused_[group]);
      nodes.push_back(std::move(n));
    }
    fused_graph->device = g_.device;
    fused_graph->slots = g_.slots;
    fused_graph->outputs = g_.outputs;
    fused_graph->random_sources = g_.random_sources;
    fused_graph->nodes = std::move(nodes);
  }

  int Size(int group) const {
    return static_cast<int>(
        std::count(group_of_.begin(), group_of_.end(), group));
  }
  // Its nodes run op by op.
  void Unclaim(int group) {
    for (int32_t& x : claimed_) {
      if (x == group) x = -1;
    }
    for (int& x : group_of_) {
      if (x == group) x = -1;
    }
  }
  void Refuse(int group, const std::string& why) {
    Unclaim(group);
    outcome_.refused.push_back(absl::StrCat("group ", group, ": ", why));
  }
  void RefuseAll(const std::string& why) {
    for (int group = 0; group < num_groups_; ++group) {
      if (Size(group) > 0) Refuse(group, why);
    }
  }

  const Graph& g_;
  const Device device_;
  const bool time_groups_;
  FusionOutcome outcome_;
  Offer offer_;
  std::vector<int32_t> claimed_;  // Per offered node: its group, or -1.
  std::vector<int> group_of_;     // Per graph node: its group, or -1.
  int num_groups_ = 0;
  std::vector<std::vector<int>> next_;              // Successors(g_).
  std::vector<std::shared_ptr<FusedGroup>> fused_;  // Per group.
};

}  // namespace

absl::StatusOr<FusionOutcome> FuseWithBackend(const Graph& g,
                                              Graph* fused_graph,
                                              bool time_groups) {
  return Fusion(g, time_groups).Run(fused_graph);
}

}  // namespace mixrt::compiler
