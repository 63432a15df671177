// The plan's kept launches: launches on constants only (an autocast's
// weight casts, a weight's transpose, what is computed from those) whose
// results are kept between runs and computed again only when a source's
// version changed, and the weights whose fused readers keep their own
// copies, released until a source changes (Plan::kept_launches).
#include "core/compiler/plan.h"
#include "mixrt/status_macros.h"

namespace mixrt::compiler {

void Plan::FindKeptLaunches() {
  const size_t slots = graph_.slots.size();
  kept_of_node_.assign(graph_.nodes.size(), -1);
  std::vector<int> writers(slots, 0);
  for (const GraphNode& n : graph_.nodes) {
    for (const ValueRef& v : n.outputs) ++writers[v.slot];
  }
  for (size_t i = 0; i < graph_.nodes.size(); ++i) {
    const GraphNode& n = graph_.nodes[i];
    // A launch without inputs is kept only when it is a constant: fill and
    // arange (random draws never reach a graph).
    if (n.kind != GraphNode::Kind::kLaunch ||
        (n.inputs.empty() && n.op != MIXRT_OP_FILL &&
         n.op != MIXRT_OP_ARANGE)) {
      continue;
    }
    bool keep = true;
    std::vector<int> sources;
    for (const ValueRef& v : n.inputs) {
      keep &= graph_.slots[v.slot].kind == StorageSlot::Kind::kConstant ||
              slots_[v.slot].kept;
      sources.push_back(v.slot);
    }
    for (const ValueRef& v : n.outputs) {
      keep &= Temporary(v.slot) && writers[v.slot] == 1 && !slots_[v.slot].kept;
    }
    if (!keep) continue;
    kept_of_node_[i] = static_cast<int>(kept_launches_.size());
    kept_launches_.push_back({static_cast<int>(i), std::move(sources), {}});
    for (const ValueRef& v : n.outputs) slots_[v.slot].kept = true;
  }
}

void Plan::FindWeightReaders() {
  const size_t slots = graph_.slots.size();
  std::vector<bool> other_reader(slots, false);
  for (size_t i = 0; i < graph_.nodes.size(); ++i) {
    const GraphNode& n = graph_.nodes[i];
    if (kept_of_node_[i] >= 0) {
      for (const ValueRef& v : n.outputs)
        slots_[v.slot].kept_writer = static_cast<int>(i);
    }
    for (size_t k = 0; k < n.inputs.size(); ++k) {
      const int slot = n.inputs[k].slot;
      if (!slots_[slot].kept) continue;
      bool weight = false;
      if (n.kind == GraphNode::Kind::kFused) {
        for (size_t w = 0; w < n.fused->weights.size(); ++w) {
          if (n.fused->weights[w].first != static_cast<int>(k)) continue;
          slots_[slot].weight_readers.emplace_back(static_cast<int>(i),
                                                   static_cast<int>(w));
          weight = true;
        }
      }
      other_reader[slot] = other_reader[slot] || !weight;
    }
  }
  for (const ValueRef& v : graph_.outputs) other_reader[v.slot] = true;
  for (size_t s = 0; s < slots; ++s) {
    if (other_reader[s]) slots_[s].weight_readers.clear();
  }
}

bool Plan::KeptLaunchDue(int slot) const {
  const KeptLaunch& k = kept_launches_[kept_of_node_[slots_[slot].kept_writer]];
  if (!k.computed) return true;
  for (size_t i = 0; i < k.sources.size(); ++i) {
    // A kept source computed again this run changes its version then.
    if (slots_[k.sources[i]].kept && KeptLaunchDue(k.sources[i])) return true;
    if (SourceVersion(k.sources[i]) != k.versions[i]) return true;
  }
  return false;
}

void Plan::ReleaseCopiedWeights() {
  for (size_t s = 0; s < slots_.size(); ++s) {
    if (slots_[s].weight_readers.empty() || slots_[s].released ||
        slots_[s].kept_storage == nullptr)
      continue;
    bool copied = true;
    for (const auto& [node, w] : slots_[s].weight_readers) {
      copied =
          copied && node < static_cast<int>(keeps_copy_.size()) &&
          w < static_cast<int>(keeps_copy_[node].size()) &&
          keeps_copy_[node][w] &&
          told_weight_versions_[node][w] == SourceVersion(static_cast<int>(s));
    }
    if (!copied) continue;
    slots_[s].kept_storage.reset();
    slots_[s].run.reset();
    slots_[s].released = true;
  }
}

uint64_t Plan::released_bytes() const {
  uint64_t total = 0;
  for (size_t s = 0; s < slots_.size(); ++s) {
    if (slots_[s].released) total += graph_.slots[s].bytes;
  }
  return total;
}

uint64_t Plan::SourceVersion(int slot) const {
  if (slots_[slot].kept) return slots_[slot].kept_version;
  // A constant: this run's hold on it (Run takes one for every constant).
  return slots_[slot].run != nullptr ? slots_[slot].run->version() : 0;
}

uint64_t Plan::kept_bytes() const {
  uint64_t total = 0;
  for (size_t s = 0; s < slots_.size(); ++s) {
    if (slots_[s].kept) total += graph_.slots[s].bytes;
  }
  return total;
}

absl::Status Plan::TellWeightVersions(int i) {
  const GraphNode& n = graph_.nodes[i];
  if (n.kind != GraphNode::Kind::kFused || n.fused->weights.empty())
    return absl::OkStatus();
  told_weight_versions_.resize(graph_.nodes.size());
  std::vector<std::optional<uint64_t>>& told = told_weight_versions_[i];
  told.resize(n.fused->weights.size());
  for (size_t w = 0; w < told.size(); ++w) {
    const auto [input, value] = n.fused->weights[w];
    const int slot = n.inputs[input].slot;
    // A weight the plan does not keep has no version to tell: the kernel
    // keeps nothing from it.
    if (graph_.slots[slot].kind != StorageSlot::Kind::kConstant &&
        !slots_[slot].kept)
      continue;
    const uint64_t version = SourceVersion(slot);
    if (told[w] == version) continue;
    MIXRT_ASSIGN_OR_RETURN(const bool keeps,
                           n.fused->kernel->SetWeightVersion(value, version));
    told[w] = version;
    keeps_copy_.resize(graph_.nodes.size());
    keeps_copy_[i].resize(told.size(), false);
    keeps_copy_[i][w] = keeps;
  }
  return absl::OkStatus();
}

}  // namespace mixrt::compiler
