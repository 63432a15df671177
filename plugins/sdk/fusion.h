// Fusion (ABI 1.1) as the SDK hands it to a plugin: the offered subgraph
// decoded and checked once into owned C++ values (a plugin may keep any of
// it), the group bookkeeping every plugin needs (what a group reads from
// outside, what it must store), and the kernel a plugin compiles a group
// into.
#ifndef MIXRT_PLUGINS_SDK_FUSION_H_
#define MIXRT_PLUGINS_SDK_FUSION_H_

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "mixrt/plugin_api.h"
#include "plugins/sdk/span.h"
#include "plugins/sdk/status.h"

namespace mixrt::sdk {

template <typename Attrs>
struct AttrsFirstVersion;  // plugin.h

struct FusionValue {
  MixrtDtype dtype = MIXRT_DTYPE_F32;
  std::vector<int64_t> shape, strides;
  std::vector<int32_t> symbols;  // Per dim (-1 static); empty: all static.
  uint32_t flags = 0;            // MIXRT_FUSION_VALUE_*
  int view_of = -1;
  int64_t view_offset = 0;

  int64_t numel() const;
  bool is_contiguous() const;  // Row-major and dense (size-1 dims aside).
  bool is_static() const;      // No symbolic dim.
  bool has(uint32_t flag) const { return (flags & flag) != 0; }
  // Its descriptor at `data`, pointing into shape and strides (valid while
  // this value is); symbolic dims as traced.
  MixrtTensorDesc Desc(void* data) const;
};

struct FusionNode {
  MixrtOp op = MIXRT_OP_FILL;
  std::vector<uint8_t> attrs;   // The attribute struct, copied; empty: none.
  bool attrs_extended = false;  // Its extension chain was dropped.
  std::vector<int> inputs, outputs;

  // The attribute struct zero-filled past what the host sent (as
  // KernelCall::GetAttrs does); an error when there is none or it is
  // shorter than the struct's first version.
  template <typename Attrs>
  StatusOr<Attrs> GetAttrs() const;
};

struct FusionGraph {
  std::vector<FusionValue> values;
  std::vector<FusionNode> nodes;
  int num_symbols = 0;
  std::vector<int> producer;  // Per value: the node writing it, or -1.
  // Per value: the nodes reading it, directly or through a view of it.
  std::vector<std::vector<int>> readers;

  // Checks what the ABI promises (indexes in range, one writer per value,
  // views never written, inputs written by none, dependences in order)
  // and copies.
  static StatusOr<FusionGraph> Decode(const MixrtFusionGraph& g);

  // Whether value v views another value's elements in order (both
  // static and contiguous, the same count and dtype, no offset): a reader
  // in the writer's group takes the written value itself (plugin_api.h).
  bool IsPlainReshape(int v) const;
  // The value v is a plain reshape of, else v itself: the memory a reader
  // of v reads.
  int ReshapeBase(int v) const;

  // The values a group reads that none of its nodes writes (the run's
  // inputs), and the values it writes that are OUTPUT or read by a node
  // outside it or through a view that is not a plain reshape (what it must
  // store), each in value order.
  std::vector<int> GroupInputs(Span<const int> group_of_node, int group) const;
  std::vector<int> GroupStores(Span<const int> group_of_node, int group) const;
  // The group's nodes in graph order.
  static std::vector<int> GroupNodes(Span<const int> group_of_node, int group);
};

// A loop's shape around the one run of dims a reduction reduces (the bits
// of axes_mask): the products of the dims before the run, of the run, and
// of the dims after it. Loops over it take (outer, inner) pairs and add the
// middle rows in order.
struct ReducedSplit {
  int64_t outer = 1, middle = 1, inner = 1;
};
// False when the mask is empty, names a dim past the shape, or is not one
// run of adjacent dims.
bool SplitAtReducedDims(Span<const int64_t> shape, uint32_t axes_mask,
                        ReducedSplit* split);

// What a plugin compiles a group into. Run may be called from any thread,
// never twice at once for one kernel (the host serializes a plan's runs).
class FusedKernel {
 public:
  virtual ~FusedKernel() = default;
  // `value_data`: one address per value of the graph (see plugin_api.h's
  // MixrtFusedKernel_Run_Args for which are set); `symbols`: their sizes.
  virtual Status Run(Span<void* const> value_data,
                     Span<const int64_t> symbols) = 0;
  virtual std::string Description() const = 0;
  // The version of WEIGHT value `value` that the next runs see (see
  // plugin_api.h's fused_kernel_set_weight_version): a kernel keeping a
  // copy prepared from the weight redoes it when the version changes.
  virtual void SetWeightVersion(int value, uint64_t version) {}
  // Asked right after SetWeightVersion: true promises that the first run
  // with that version prepares all the kernel needs of `value` and that no
  // later run reads its memory until another version (the host may then
  // release it and pass null: see keeps_copy in plugin_api.h).
  virtual bool KeepsCopyOf(int value) const { return false; }

  // Device memory the kernel needs for itself across its runs (ABI 1.2's
  // scratch_bytes): asked once, right after CompileFusion. The host
  // allocates it and the SDK stores it before the first run: scratch()
  // from then on. A host or table older than 1.2 cannot give it: the
  // compile then fails and the group runs op by op.
  virtual uint64_t ScratchBytes() const { return 0; }
  void* scratch() const { return scratch_; }
  // The SDK's fused_kernel_set_scratch (which checked the size).
  void SetScratch(void* scratch) { scratch_ = scratch; }

 private:
  void* scratch_ = nullptr;
};

template <typename Attrs>
StatusOr<Attrs> FusionNode::GetAttrs() const {
  Attrs a;
  std::memset(&a, 0, sizeof(a));
  if (attrs.size() < AttrsFirstVersion<Attrs>::kSize) {
    return InvalidArgumentError(
        "fused node's attribute struct is missing or shorter than its op's "
        "first version");
  }
  std::memcpy(&a, attrs.data(), std::min(attrs.size(), sizeof(a)));
  a.struct_size = sizeof(a);
  a.ext = nullptr;
  return a;
}

}  // namespace mixrt::sdk

#endif  // MIXRT_PLUGINS_SDK_FUSION_H_
