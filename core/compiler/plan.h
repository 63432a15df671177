// A graph made executable: its launches with their descriptors prepared
// once, so a run only fills in data pointers and calls the backend (no op
// dispatch, shape checks or autocast decisions per op). Memory the call
// allocated comes from the device's caching allocator on every run, taken
// at a temporary's first node and given back after its last; or,
// preallocated, temporaries whose lifetimes do not overlap share buffers
// held between runs (mode "reduce-overhead", the CPU analogue of CUDA
// graphs' static memory). Results and saved activations are always fresh.
#ifndef MIXRT_CORE_COMPILER_PLAN_H_
#define MIXRT_CORE_COMPILER_PLAN_H_

#include <memory>
#include <mutex>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "core/compiler/graph.h"
#include "core/tensor/tensor.h"

namespace mixrt::compiler {

// Memory a forward run hands to its backward: an activation it allocated,
// or an input the backward reads (a saved input of a linear, say), with the
// address the graph's offsets count from.
struct SavedMemory {
  std::shared_ptr<Storage> storage;
  char* base = nullptr;
};

class Plan {
 public:
  static absl::StatusOr<std::unique_ptr<Plan>> Build(Graph graph,
                                                     bool preallocate);

  // The inputs must match what the graph was captured with (the compiled
  // function's guards check that). Runs of one plan are serialized: they
  // share its descriptors and, preallocated, its memory.
  // A forward graph with saved slots hands their memory to `saved_out`
  // (indexed by slot); a backward graph reads its kSaved slots from
  // `saved_in` (the forward run's saved_out). The run drops its references
  // to each saved slot after the slot's last node (the caller moves in the
  // only other ones when the backward frees the activations, as eager
  // backward frees each node's as soon as that node has run).
  absl::StatusOr<std::vector<Tensor>> Run(
      absl::Span<const Tensor> inputs,
      std::vector<SavedMemory> saved_in = {},
      std::vector<SavedMemory>* saved_out = nullptr);

  const Graph& graph() const { return graph_; }
  // Memory held between runs (preallocated intermediates).
  uint64_t held_bytes() const;

 private:
  struct Prepared {
    std::vector<MixrtTensorDesc> inputs, outputs;
  };

  explicit Plan(Graph graph);
  absl::Status Allocate(int slot);  // This run's memory and base for it.
  bool Temporary(int slot) const;  // Internal, neither returned nor saved.
  absl::Status PlanBuffers();      // Held buffers shared by lifetime.

  std::mutex mutex_;
  Graph graph_;
  std::vector<Prepared> prepared_;
  std::vector<std::shared_ptr<Storage>> held_;  // Per slot; preallocated.
  std::vector<std::shared_ptr<Storage>> run_;   // Per slot, this run's.
  std::vector<char*> bases_;                    // Per slot, this run's.
  std::vector<int> first_use_, last_use_;       // Per slot: node indexes.
  std::vector<std::vector<int>> frees_after_;   // Per node: temporaries.
  // Per node: kSaved slots last used there (none a result views).
  std::vector<std::vector<int>> saved_done_after_;
  uint64_t held_total_ = 0;
};

}  // namespace mixrt::compiler

#endif  // MIXRT_CORE_COMPILER_PLAN_H_
