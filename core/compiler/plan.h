// A graph made executable: its launches with their descriptors prepared
// once, so a run only fills in data pointers and calls the backend (no op
// dispatch, shape checks or autocast decisions per op). Memory the call
// allocated comes from the device's caching allocator on every run, taken
// at a temporary's first node and given back after its last; or,
// preallocated, temporaries whose lifetimes do not overlap share buffers
// held between runs (mode "reduce-overhead", the CPU analogue of CUDA
// graphs' static memory pool). Results and saved activations are always
// fresh.
#ifndef MIXRT_CORE_COMPILER_PLAN_H_
#define MIXRT_CORE_COMPILER_PLAN_H_

#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "core/compiler/graph.h"
#include "core/compiler/kept_launches.h"
#include "core/compiler/random_draws.h"
#include "core/plugin/backend.h"
#include "core/tensor/tensor.h"

namespace mixrt::compiler {

// Memory a forward run hands to its backward: an activation it allocated,
// or an input the backward reads (a saved input of a linear, say), with the
// address the graph's offsets count from.
struct SavedMemory {
  std::shared_ptr<Storage> storage;
  char* base = nullptr;
};

// Buffers held between runs for plans that never run at once, a forward
// and its backward: buffer i is the largest any of them asked for as its
// i-th largest, so the memory of the forward's temporaries serves the
// backward's, as eager's freed memory does (held apart, the two sets
// made a transformer block's step peak at 1.4x eager's). Runs of the
// plans sharing them are serialized by its mutex.
class HeldBuffers {
 public:
  // Grows the buffers to hold `sizes` (largest first).
  absl::Status Reserve(const Device& device,
                       const std::vector<uint64_t>& sizes);
  const std::shared_ptr<Storage>& buffer(int i) const { return buffers_[i]; }
  uint64_t bytes() const;
  std::mutex& mutex() { return mutex_; }

 private:
  std::mutex mutex_;
  std::vector<std::shared_ptr<Storage>> buffers_;
};

// The status of a run stopped at a host read (GraphNode::kHostRead) that
// found another value than its trace: the caller runs the call again.
inline constexpr char kHostValueChangedPayload[] =
    "mixrt.compiler/host_value_changed";
absl::Status HostValueChanged(int node);
bool IsHostValueChanged(const absl::Status& status);

class Plan {
 public:
  // Whether MIXRT_COMPILE_FUSION leaves fusion on (the default).
  static bool FusionEnabled();

  struct BuildOptions {
    // Temporaries live in `held` (shared with the plans given the same
    // one; a new one when null), and on a backend that makes kernel graphs
    // (ABI 1.1) runs of launches become kernel graphs, each replayed by
    // one call (MIXRT_COMPILE_KERNEL_GRAPHS=0 launches one by one, to
    // compare): "reduce-overhead".
    bool preallocate = false;
    std::shared_ptr<HeldBuffers> held;
    // The graph's launches are first offered to the backend's fusion (ABI
    // 1.1; MIXRT_COMPILE_FUSION=0 turns it off, to compare).
    bool fuse = false;
    // With `fuse`: a fused kernel is kept only where it beats its launches
    // on the graph's shapes ("max-autotune").
    bool time_fusion = false;
  };
  static absl::StatusOr<std::unique_ptr<Plan>> Build(Graph graph,
                                                     BuildOptions options);

  // The inputs must match what the graph was captured with (the compiled
  // function's guards check that). Runs of one plan, and of the plans
  // sharing its held buffers, are serialized: they share its descriptors
  // and, preallocated, its memory.
  // A forward graph with saved slots hands their memory to `saved_out`
  // (indexed by slot); a backward graph reads its kSaved slots from
  // `saved_in` (the forward run's saved_out). The run drops its references
  // to each saved slot after the slot's last node (the caller moves in the
  // only other ones when the backward frees the activations, as eager
  // backward frees each node's as soon as that node has run).
  // A graph with random nodes needs `random`: the generator state its
  // forward reserved (random_draws.h), the same for a call's backward.
  absl::StatusOr<std::vector<Tensor>> Run(
      absl::Span<const Tensor> inputs, std::vector<SavedMemory> saved_in = {},
      std::vector<SavedMemory>* saved_out = nullptr,
      const RandomBase* random = nullptr);

  // The graph as traced (what generalizing and sharing compare).
  const Graph& graph() const { return traced_ != nullptr ? *traced_ : graph_; }
  // The graph it runs: the traced one with fused groups in place.
  const Graph& executed_graph() const { return graph_; }
  // What fusion did, for the log: "2 fused kernels for 5 launches: ...",
  // or why nothing was fused ("" when not asked).
  const std::string& fusion() const { return fusion_; }
  // Memory held between runs (preallocated intermediates), with the plans
  // sharing it.
  uint64_t held_bytes() const { return held_->bytes(); }
  // Launches on constants only whose results are kept between runs (see
  // KeptLaunches): their count, the bytes kept, and of those the bytes
  // released after the fused kernels reading them prepared their own
  // copies (a weight's bf16 copy that a matmul packed).
  int kept_launches() const { return kept_->count(); }
  uint64_t kept_bytes() const { return kept_->kept_bytes(); }
  uint64_t released_bytes() const { return kept_->released_bytes(); }
  // How the launches run: "kernel graphs: 2 (27 launches)", or "one by
  // one" with the reason when the backend made no graphs.
  const std::string& execution() const { return execution_; }

 private:
  struct Prepared {
    std::vector<MixrtTensorDesc> inputs, outputs;
    std::vector<void*> value_data;  // A fused node's, per fusion value.
  };

  explicit Plan(Graph graph);
  // Each slot's views end inside it (internal memory here; inputs and
  // constants per run, CheckExtent): never a read past memory.
  absl::Status BoundViews();
  absl::Status CheckExtent(int slot, uint64_t available) const;
  absl::Status Allocate(int slot);  // This run's memory and base for it.
  bool Temporary(int slot) const;   // Internal, neither returned nor saved.
  absl::Status PlanBuffers();       // Held buffers shared by lifetime.
  // Kept launches no earlier node's output feeds go first, so they do not
  // split the kernel graphs; then runs of plain launches become graphs.
  void OrderForGraphs();
  absl::Status BuildKernelGraphs();
  // BuildKernelGraphs' steps: whether a node can be a kernel graph's step,
  // releases memory or takes fresh memory; where the segment from order_
  // position `pos` ends; the kernel graph of positions [pos, last].
  bool Graphable(int node) const;
  bool Releases(int node) const;
  bool Allocates(int node) const;
  int SegmentEnd(int pos) const;
  absl::Status BuildSegment(int pos, int last);
  // Run's phases: each slot's memory for this run (inputs and constants
  // checked against the extent the graph reads), the nodes and kernel
  // graphs in order, the results, the activations a backward reads.
  absl::Status BindSlot(int slot, absl::Span<const Tensor> inputs,
                        const std::vector<SavedMemory>& saved_in);
  absl::Status RunInOrder(std::vector<SavedMemory>& saved_in);
  std::vector<Tensor> Results(absl::Span<const Tensor> inputs) const;
  std::vector<SavedMemory> SavedActivations(
      absl::Span<const Tensor> inputs) const;
  absl::Status ProfiledRunNode(int i, std::vector<SavedMemory>& saved_in);
  absl::Status RunNode(int i, std::vector<SavedMemory>& saved_in);
  // A random node, launched with this run's seed and offset.
  absl::Status LaunchRandom(const GraphNode& n, const Prepared& p);
  // A host read node: the value now against the trace's.
  absl::Status CheckHostRead(int i, const GraphNode& n, const Prepared& p);
  absl::Status RunSegment(int s, std::vector<SavedMemory>& saved_in);
  // A failed node's status, naming it ("compiled graph node 3 (matmul...").
  absl::Status NodeError(int node, absl::string_view where,
                         const absl::Status& status) const;
  // Frees and version counts due after node i.
  void AfterNode(int i, std::vector<SavedMemory>& saved_in);

  std::shared_ptr<HeldBuffers> held_;
  Graph graph_;
  // Per slot of graph_: what the plan knows of it and holds for it.
  struct SlotState {
    int buffer = -1;                    // Its held buffer, or -1.
    int first_use = -1, last_use = -1;  // Node indexes.
    uint64_t extent = 0;                // Bytes its views reach from its start.
    char* base = nullptr;               // This run's.
    std::shared_ptr<Storage> run;       // This run's.
    std::shared_ptr<Storage> recycled;  // The last run's (see kRecycledBytes).
  };
  std::vector<SlotState> slots_;
  std::unique_ptr<const Graph> traced_;  // Set when fusion changed graph_.
  std::string fusion_;
  std::vector<Prepared> prepared_;
  // Built with the plan's lifetimes (Build); reads constants' versions
  // from this run's holds on them.
  std::unique_ptr<KeptLaunches> kept_;
  // Preallocated plans hand saved slots (activations for the backward) of
  // at most kRecycledBytes the memory of an earlier run again once nothing
  // else holds it (per slot: the last run's). Larger ones come from the
  // allocator each run: their kernels dwarf an allocation, and kept they
  // would raise the memory held between steps.
  static constexpr uint64_t kRecycledBytes = 64 << 10;
  bool recycle_ = false;  // Recycled slots: SlotState::recycled.
  std::vector<std::vector<int>> frees_after_;  // Per node: temporaries.
  // Per node: kSaved slots last used there (none a result views).
  std::vector<std::vector<int>> saved_done_after_;
  // The order nodes run in, and the runs of it that are kernel graphs
  // (positions [first, last] of order_; buffers are the graph's slots).
  std::vector<int> order_;
  struct Segment {
    int first = 0, last = 0;
    std::unique_ptr<PluginKernelGraph> graph;
    std::vector<int> internal_slots;  // Allocated before the graph runs.
  };
  std::vector<Segment> segments_;
  std::vector<int> segment_at_;  // Per position of order_: a segment, or -1.
  std::vector<void*> graph_buffers_;
  absl::Span<const Tensor> run_inputs_;     // This run's inputs.
  const RandomBase* run_random_ = nullptr;  // This run's generator state.
  std::vector<uint8_t> random_attrs_;       // A random node's, this run.
  std::vector<uint8_t> host_read_;          // A host read node's, this run.
  std::string execution_ = "one by one";
};

}  // namespace mixrt::compiler

#endif  // MIXRT_CORE_COMPILER_PLAN_H_
