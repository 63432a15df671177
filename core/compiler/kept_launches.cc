#include "core/compiler/kept_launches.h"

#include "absl/status/status.h"
#include "mixrt/status_macros.h"

namespace mixrt::compiler {

KeptLaunches::KeptLaunches(const Graph& graph, SlotTest temporary,
                           ConstantVersion constant_version)
    : graph_(graph),
      constant_version_(std::move(constant_version)),
      slots_(graph.slots.size()) {
  FindLaunches(temporary);
  FindWeightReaders();
}

// A launch that reads only constants and kept results and writes
// temporaries no other node writes: the same on every run while those are
// unchanged. (A saved or returned result is fresh per run, so what feeds a
// backward or the caller is not kept.)
void KeptLaunches::FindLaunches(const SlotTest& temporary) {
  of_node_.assign(graph_.nodes.size(), -1);
  std::vector<int> writers(graph_.slots.size(), 0);
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
      keep &= temporary(v.slot) && writers[v.slot] == 1 && !slots_[v.slot].kept;
    }
    if (!keep) continue;
    of_node_[i] = static_cast<int>(launches_.size());
    launches_.push_back({static_cast<int>(i), std::move(sources), {}});
    for (const ValueRef& v : n.outputs) {
      slots_[v.slot].kept = true;
      slots_[v.slot].writer = static_cast<int>(i);
    }
  }
}

void KeptLaunches::FindWeightReaders() {
  const size_t slots = graph_.slots.size();
  std::vector<bool> other_reader(slots, false);
  for (size_t i = 0; i < graph_.nodes.size(); ++i) {
    const GraphNode& n = graph_.nodes[i];
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

uint64_t KeptLaunches::kept_bytes() const {
  uint64_t total = 0;
  for (size_t s = 0; s < slots_.size(); ++s) {
    if (slots_[s].kept) total += graph_.slots[s].bytes;
  }
  return total;
}

uint64_t KeptLaunches::released_bytes() const {
  uint64_t total = 0;
  for (size_t s = 0; s < slots_.size(); ++s) {
    if (slots_[s].released) total += graph_.slots[s].bytes;
  }
  return total;
}

absl::Status KeptLaunches::Bind(int slot, const Device& device,
                                std::shared_ptr<Storage>* run) {
  Slot& s = slots_[slot];
  if (s.released && !Due(slot)) {
    run->reset();
    return absl::OkStatus();
  }
  s.released = false;
  if (s.storage == nullptr) {
    MIXRT_ASSIGN_OR_RETURN(s.storage,
                           Storage::Allocate(device, graph_.slots[slot].bytes));
  }
  *run = s.storage;
  return absl::OkStatus();
}

bool KeptLaunches::Due(int slot) const {
  const Launch& k = launches_[of_node_[slots_[slot].writer]];
  if (!k.computed) return true;
  for (size_t i = 0; i < k.sources.size(); ++i) {
    // A kept source computed again this run changes its version then.
    if (slots_[k.sources[i]].kept && Due(k.sources[i])) return true;
    if (SourceVersion(k.sources[i]) != k.versions[i]) return true;
  }
  return false;
}

uint64_t KeptLaunches::SourceVersion(int slot) const {
  return slots_[slot].kept ? slots_[slot].version : constant_version_(slot);
}

absl::Status KeptLaunches::RunIfDue(
    int node, const std::function<absl::Status()>& launch) {
  Launch& k = launches_[of_node_[node]];
  std::vector<uint64_t> versions;
  for (int source : k.sources) versions.push_back(SourceVersion(source));
  if (k.computed && versions == k.versions) return absl::OkStatus();
  k.computed = false;
  MIXRT_RETURN_IF_ERROR(launch());
  k.versions = std::move(versions);
  k.computed = true;
  for (const ValueRef& v : graph_.nodes[node].outputs) ++slots_[v.slot].version;
  return absl::OkStatus();
}

absl::Status KeptLaunches::TellWeightVersions(int node) {
  const GraphNode& n = graph_.nodes[node];
  if (n.kind != GraphNode::Kind::kFused || n.fused->weights.empty())
    return absl::OkStatus();
  told_versions_.resize(graph_.nodes.size());
  keeps_copy_.resize(graph_.nodes.size());
  std::vector<std::optional<uint64_t>>& told = told_versions_[node];
  told.resize(n.fused->weights.size());
  keeps_copy_[node].resize(told.size(), false);
  for (size_t w = 0; w < told.size(); ++w) {
    const auto [input, value] = n.fused->weights[w];
    const int slot = n.inputs[input].slot;
    // A weight neither constant nor kept has no version to tell: the
    // kernel keeps nothing from it.
    if (graph_.slots[slot].kind != StorageSlot::Kind::kConstant &&
        !slots_[slot].kept)
      continue;
    const uint64_t version = SourceVersion(slot);
    if (told[w] == version) continue;
    MIXRT_ASSIGN_OR_RETURN(const bool keeps,
                           n.fused->kernel->SetWeightVersion(value, version));
    told[w] = version;
    keeps_copy_[node][w] = keeps;
  }
  return absl::OkStatus();
}

void KeptLaunches::ReleaseCopiedWeights() {
  for (size_t s = 0; s < slots_.size(); ++s) {
    Slot& slot = slots_[s];
    if (slot.weight_readers.empty() || slot.released || slot.storage == nullptr)
      continue;
    bool copied = true;
    for (const auto& [node, w] : slot.weight_readers) {
      copied = copied && node < static_cast<int>(keeps_copy_.size()) &&
               w < static_cast<int>(keeps_copy_[node].size()) &&
               keeps_copy_[node][w] &&
               told_versions_[node][w] == SourceVersion(static_cast<int>(s));
    }
    if (!copied) continue;
    slot.storage.reset();
    slot.released = true;
  }
}

}  // namespace mixrt::compiler
