// The compiler's graph IR: what one traced call of a function did on its
// device, as kernel launches over views of storages. Autocast has already
// chosen every precision (its casts are launches like any other), so a
// replay makes the eager run's choices.
#ifndef MIXRT_CORE_COMPILER_GRAPH_H_
#define MIXRT_CORE_COMPILER_GRAPH_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/plugin/backend.h"
#include "core/plugin/device.h"
#include "core/tensor/generator.h"
#include "core/tensor/shape.h"
#include "core/tensor/storage.h"
#include "mixrt/plugin_api.h"

namespace mixrt::compiler {

// Memory a graph touches.
struct StorageSlot {
  enum class Kind {
    kInput,     // The view of argument `input` (offsets count from it).
    kConstant,  // Memory that outlives the call (parameters, buffers).
    kInternal,  // Allocated by the call: intermediates and results.
    kSaved,     // A backward graph's view of forward slot `forward_slot`.
  };
  Kind kind = Kind::kInternal;
  int input = -1;
  int forward_slot = -1;
  // Not owned: a graph must not keep alive what nothing else can reach.
  // Memory only the graph would hold is memory the function can no longer
  // read (the tensor it closed over was rebound or freed), so a replay
  // that finds it gone traces again (CompiledFunction) instead of reading
  // the old tensor.
  std::weak_ptr<Storage> constant;
  // kConstant memory of parameter `parameter` of the traced module, so
  // another instance of the module can run the graph on its own.
  int parameter = -1;
  uint64_t bytes = 0;  // kInternal.
  // kInternal memory a returned tensor views: fresh on every call, so a
  // result never changes under the caller when the graph runs again.
  bool returned = false;
  // kInternal memory the backward graph reads (an activation it saved):
  // fresh on every call and handed to that call's backward.
  bool saved = false;
};

// A tensor as a launch sees it: a view of a slot.
struct ValueRef {
  int slot = -1;
  int64_t offset = 0;  // Elements from the slot's start.
  DType dtype = DType::kF32;
  Shape shape;
  Strides strides;
};

// Launches a backend fused into one kernel (ABI 1.1's fusion), run as one
// node: its inputs are what the group reads from outside, its outputs what
// it stores for others.
struct FusedGroup {
  std::unique_ptr<PluginFusedKernel> kernel;
  int num_values = 0;  // The fusion graph's, which value_data is indexed by.
  // The fusion graph's value of each of the node's inputs and outputs.
  std::vector<int> input_values, output_values;
  int launches = 0;  // How many launches it replaced.
  // Per WEIGHT value the kernel reads: the node input it is, and its
  // fusion value (for fused_kernel_set_weight_version).
  std::vector<std::pair<int, int>> weights;
  std::string timing;  // max-autotune's measurement, for Explain.
};

struct GraphNode {
  // kHostRead (compile's fullgraph only): inputs[0], dense, copied to the
  // host and compared with host_bytes, the value the trace read; a replay
  // that finds another value stops there (IsHostValueChanged) and the call
  // traces again, as the host code after the read may have used it.
  enum class Kind { kLaunch, kHostWrite, kFused, kHostRead };
  Kind kind = Kind::kLaunch;
  MixrtOp op = MIXRT_OP_COPY;
  std::vector<uint8_t> attrs;  // The op's attribute struct; empty: none.
  std::vector<ValueRef> inputs;
  std::vector<ValueRef> outputs;  // kHostWrite: the one destination.
  // kHostWrite: the data written; kHostRead: the data the trace read.
  std::vector<uint8_t> host_bytes;
  std::shared_ptr<const FusedGroup> fused;  // kFused.
  // A launch that reads random numbers (random_draws.h): its attrs hold
  // seed 0 and offset 0, and each run launches it with the seed of
  // generator `random_source` (of the forward graph's random_sources) and
  // the block that run reserved from it + random_offset.
  int random_source = -1;
  int64_t random_offset = 0;
  bool random() const { return random_source >= 0; }
};

// A generator a graph draws from: every run reserves `blocks` Philox
// blocks from it. Held weakly, as constants are: a graph whose generator
// is gone traces again.
struct RandomSource {
  std::weak_ptr<Generator::State> state;
  int64_t blocks = 0;
};

struct Graph {
  Device device;
  std::vector<StorageSlot> slots;
  std::vector<GraphNode> nodes;
  std::vector<ValueRef> outputs;  // The function's results, in order.
  // What a run draws from (a forward graph's; a backward's random nodes
  // read the numbers its forward drew).
  std::vector<RandomSource> random_sources;

  // One line per node: "%3 = matmul(%1, const0) bf16[4096, 384]".
  std::string ToString() const;
};

// Whether two slots' constants are the same memory (both none included).
inline bool SameConstant(const StorageSlot& a, const StorageSlot& b) {
  return !a.constant.owner_before(b.constant) &&
         !b.constant.owner_before(a.constant);
}

// The ABI descriptor of `v` (data unset), pointing into its shape and
// strides: valid while `v` is.
MixrtTensorDesc Describe(const ValueRef& v);

// Whether `v` reads its elements row-major and densely from its offset
// (size-1 dims aside).
bool IsDense(const ValueRef& v);

// How many elements `v` views.
int64_t Elements(const ValueRef& v);

// Whether launch `n` adds into its output (a matmul with beta != 0), so
// reads what it writes.
bool Accumulates(const GraphNode& n);

// Why `g` is not self-contained, or "": the first launch that reads memory
// the call allocated before any launch or host write of the graph wrote
// it, or a result no launch wrote. Eager work the trace missed (an op run
// where the trace could not see it) shows up so: replaying such a graph
// would read whatever the memory held.
std::string UnwrittenRead(const Graph& g);

// Removes the nodes whose `drop` is set, keeping the others' order;
// returns how many went.
int DropNodes(Graph* g, const std::vector<bool>& drop);

// Per slot, the nodes (launches and host writes) writing it, in order,
// each once.
std::vector<std::vector<int>> SlotWriters(const Graph& g);

// Slots that follow from constants alone, as a plan finds the launches it
// keeps between runs (Plan::FindKeptLaunches): constants, and what one
// launch on such slots (or a fill or arange on none) writes.
std::vector<bool> ConstantDerived(const Graph& g,
                                  const std::vector<std::vector<int>>& writers);

}  // namespace mixrt::compiler

#endif  // MIXRT_CORE_COMPILER_GRAPH_H_
