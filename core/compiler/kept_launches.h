// A plan's kept launches: launches on constants only (an autocast's weight
// casts, a weight's transpose, what is computed from those) whose results
// are kept between runs and computed again only when a source's version
// changed (an optimizer step, a checkpoint load): freezing that needs no
// promise that the weights stay. And the weights whose fused readers keep
// their own copies (keeps_copy in plugin_api.h): those results are
// released until a source changes.
//
// The plan asks it three things per run: the memory of a kept slot (none
// when released and not due, Bind), whether a kept launch runs
// (RunIfDue), and, before a fused kernel runs, to tell it its weights'
// versions (TellWeightVersions); after the run it releases what is copied
// (ReleaseCopiedWeights).
#ifndef MIXRT_CORE_COMPILER_KEPT_LAUNCHES_H_
#define MIXRT_CORE_COMPILER_KEPT_LAUNCHES_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "core/compiler/graph.h"
#include "core/tensor/storage.h"

namespace mixrt::compiler {

class KeptLaunches {
 public:
  // Whether a slot is a temporary (internal, neither returned nor saved:
  // only those are kept), and a constant slot's version this run.
  using SlotTest = std::function<bool(int slot)>;
  using ConstantVersion = std::function<uint64_t(int slot)>;

  // Finds the kept launches of `graph` (which must outlive this) and the
  // fused readers of their results.
  KeptLaunches(const Graph& graph, SlotTest temporary,
               ConstantVersion constant_version);

  int count() const { return static_cast<int>(launches_.size()); }
  bool IsKeptLaunch(int node) const { return of_node_[node] >= 0; }
  bool IsKept(int slot) const { return slots_[slot].kept; }
  // A released kept slot: nothing reads it this run.
  bool Absent(int slot) const {
    return slots_[slot].kept && slots_[slot].released;
  }
  uint64_t kept_bytes() const;
  uint64_t released_bytes() const;

  // A kept slot's memory for this run: its kept storage (allocated on
  // first use, again after a release), or null when released and its
  // launch is not due (its readers hold copies).
  absl::Status Bind(int slot, const Device& device,
                    std::shared_ptr<Storage>* run);
  // Runs the kept launch of `node` through `launch` when a source's
  // version changed since it last ran (or it never ran). The versions are
  // read before the launch: a write racing with it leaves the old
  // version, and the next run computes again.
  absl::Status RunIfDue(int node, const std::function<absl::Status()>& launch);
  // Tells a fused node's kernel each kept or constant weight's version
  // when it changed, and records whether the kernel keeps a copy.
  absl::Status TellWeightVersions(int node);
  // After a run: releases the kept slots all of whose readers keep copies
  // of the version they hold.
  void ReleaseCopiedWeights();

 private:
  struct Slot {
    bool kept = false;
    int writer = -1;       // Its kept launch's node.
    uint64_t version = 0;  // Counted up each time it is computed.
    std::shared_ptr<Storage> storage;
    bool released = false;
    // (fused node, weight index) pairs reading it; none when any other
    // node reads it (it can never be released).
    std::vector<std::pair<int, int>> weight_readers;
  };
  // A launch whose results are kept: the versions of the slots it read
  // when it last ran.
  struct Launch {
    int node;
    std::vector<int> sources;
    std::vector<uint64_t> versions;
    bool computed = false;  // Once: a fill reads nothing to compare.
  };

  void FindLaunches(const SlotTest& temporary);
  void FindWeightReaders();
  // Whether the kept launch writing `slot` would compute again now.
  bool Due(int slot) const;
  // A constant's version this run, or a kept result's.
  uint64_t SourceVersion(int slot) const;

  const Graph& graph_;
  ConstantVersion constant_version_;
  std::vector<Slot> slots_;  // Per slot of graph_.
  std::vector<Launch> launches_;
  std::vector<int> of_node_;  // Per node: index in launches_, or -1.
  // Per node, per weight (FusedGroup::weights' order): the version its
  // fused kernel was last told, and what it answered (keeps a copy).
  std::vector<std::vector<std::optional<uint64_t>>> told_versions_;
  std::vector<std::vector<bool>> keeps_copy_;
};

}  // namespace mixrt::compiler

#endif  // MIXRT_CORE_COMPILER_KEPT_LAUNCHES_H_
