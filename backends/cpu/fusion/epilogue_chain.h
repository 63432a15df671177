// The chain of ops after a oneDNN matmul or convolution that becomes its
// post-ops (fused_matmul.h, fused_conv.h): which fusion nodes map to which
// post-op, checked against the op-by-op kernels' NaN and infinities.
#ifndef MIXRT_BACKENDS_CPU_FUSION_EPILOGUE_CHAIN_H_
#define MIXRT_BACKENDS_CPU_FUSION_EPILOGUE_CHAIN_H_

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/types/span.h"
#include "backends/cpu/kernels/epilogue.h"
#include "mixrt/op_names.h"
#include "mixrt/status_macros.h"
#include "oneapi/dnnl/dnnl.hpp"
#include "plugins/sdk/fusion.h"
#include "plugins/sdk/tensor_ref.h"

namespace mixrt::cpu {

// A post-op as the claim finds it: `operand` is a fusion value.
struct ChainStep {
  dnnl::algorithm algorithm = dnnl::algorithm::undef;
  float alpha = 0, beta = 0;
  int operand = -1;  // The binary op's other value, else -1.
  std::string name;
};

// The eltwise post-op computing unary `kind`, checked against the op's
// NaN and infinities; nullopt when there is none or it differs.
std::optional<ChainStep> EltwiseFor(uint32_t kind, float alpha, float beta);

// Whether a binary op's other operand `v` can be a post-op's second
// source for the chain's value `like` (the fusion decides which layouts).
using OperandFits = bool (*)(const sdk::FusionValue& v,
                             const sdk::FusionValue& like);

// The step node `n` adds when it reads `v` (the chain's current value) and
// fuses, and whether it is a cast (no step).
std::optional<ChainStep> StepFor(const sdk::FusionGraph& g,
                                 const sdk::FusionNode& n, int v,
                                 OperandFits fits, bool* cast);

// Whether node `n` is unary op `kind` of value `v` alone.
bool IsUnaryOf(const sdk::FusionNode& n, int v, uint32_t kind);

// A chain prefix's tensors as oneDNN takes them: refs holds the `leading`
// values (the primitive's operands and output), the bias, each binary
// step's operand, then the `described` values (descriptors only, no
// memory); with `data` empty, every value is described only.
struct BoundChain {
  std::vector<MixrtTensorDesc> descs;
  std::vector<sdk::TensorRef> refs;
  std::vector<EpilogueStep> steps;
  const sdk::TensorRef* bias = nullptr;
};
void BindChain(const sdk::FusionGraph& g, const std::vector<int>& leading,
               int bias, absl::Span<const ChainStep> steps,
               const std::vector<int>& described, absl::Span<void* const> data,
               BoundChain* out);

// Per node, its group (`first`, first + 1, ...) or -1: from each node of
// op `op` not `taken` (empty: none is), follow(g, node) gives its chain
// (a struct with `nodes`, the op's node first) and prefix(g, chain) how
// many of those nodes fuse (0: none); a chain reaching a taken node is
// left out.
template <typename Follow, typename Prefix>
std::vector<int> ClaimChains(const sdk::FusionGraph& g, uint32_t op,
                             absl::Span<const int> taken, int first,
                             Follow follow, Prefix prefix) {
  std::vector<int> group(g.nodes.size(), -1);
  int next = first;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    if (g.nodes[i].op != op || (!taken.empty() && taken[i] >= 0)) continue;
    const auto c = follow(g, static_cast<int>(i));
    const size_t n = c.nodes.empty() ? 0 : prefix(g, c);
    bool free = n > 0;
    for (size_t k = 0; free && !taken.empty() && k < n; ++k)
      free = taken[c.nodes[k]] < 0;
    if (!free) continue;
    for (size_t k = 0; k < n; ++k) group[c.nodes[k]] = next;
    ++next;
  }
  return group;
}

// Whether oneDNN runs a primitive on an optimized kernel ("" is none).
bool Optimized(const std::string& implementation);

// The longest prefix of a chain (its nodes' outputs `outs`, the steps each
// prefix has in `steps_upto`) that ends in f32 or the operands' dtype (what
// oneDNN writes), runs on an optimized kernel (`implementation` of a
// prefix's node count) and gains something: a post-op, or packed weights
// (`packs_weights`) for the primitive alone; 0 when none.
size_t LongestFusablePrefix(
    const sdk::FusionGraph& g, MixrtDtype operands,
    const std::vector<int>& outs, const std::vector<size_t>& steps_upto,
    bool packs_weights,
    const std::function<std::string(size_t)>& implementation);

// That group `group` is the first nodes of a chain (`nodes`, and per node
// its output value in `outs`) storing only its last node's output;
// INVALID_ARGUMENT naming `what` (a matmul, a conv2d) otherwise.
absl::Status CheckChainGroup(const sdk::FusionGraph& g,
                             absl::Span<const int> group_of_node, int group,
                             const std::vector<int>& nodes,
                             const std::vector<int>& outs,
                             const std::string& what);

template <typename Chain>
struct EpilogueGroup;

// What the matmul and conv epilogue fusions share, claim and compile:
// `op` (MIXRT_OP_MATMUL, MIXRT_OP_CONV2D) starts each chain; `follow(g,
// node)` walks the chain it feeds; `prefix(g, chain)` is how much of it
// fuses; `implementation(g, chain, nodes)` names the oneDNN kernel the
// chain's first `nodes` get; `make(g, group)` is the kernel of a group
// begun (BeginEpilogueGroup).
template <typename Chain>
struct EpilogueSkeleton {
  MixrtOp op;
  const char* kernel;   // "matmul", "conv": in messages.
  const char* product;  // "matmul", "convolution": in messages.
  Chain (*follow)(const sdk::FusionGraph& g, int node);
  size_t (*prefix)(const sdk::FusionGraph& g, const Chain& chain);
  std::string (*implementation)(const sdk::FusionGraph& g, const Chain& chain,
                                size_t nodes);
  absl::StatusOr<std::unique_ptr<sdk::FusedKernel>> (*make)(
      const sdk::FusionGraph& g, EpilogueGroup<Chain> group);
};

// One claim per chain that starts at `skeleton.op` and its fusable prefix.
template <typename Chain>
std::vector<int> ClaimEpilogues(const EpilogueSkeleton<Chain>& skeleton,
                                const sdk::FusionGraph& g,
                                absl::Span<const int> taken, int first) {
  return ClaimChains(g, skeleton.op, taken, first, skeleton.follow,
                     skeleton.prefix);
}

// A claimed group as its compiler starts from: its nodes, its chain
// (checked against the group) and the oneDNN implementation, which must be
// an optimized kernel (UNIMPLEMENTED otherwise: the launches run op by op).
template <typename Chain>
struct EpilogueGroup {
  std::vector<int> nodes;
  Chain chain;
  std::string implementation;
};

template <typename Chain>
absl::StatusOr<EpilogueGroup<Chain>> BeginEpilogueGroup(
    const EpilogueSkeleton<Chain>& skeleton, const sdk::FusionGraph& g,
    absl::Span<const int> group_of_node, int group) {
  EpilogueGroup<Chain> out;
  out.nodes = sdk::FusionGraph::GroupNodes(group_of_node, group);
  if (out.nodes.empty() || g.nodes[out.nodes[0]].op != skeleton.op) {
    return absl::InvalidArgumentError(absl::StrCat(
        "fused ", skeleton.kernel, ": the group does not start with a ",
        MixrtOpName(skeleton.op)));
  }
  out.chain = skeleton.follow(g, out.nodes[0]);
  MIXRT_RETURN_IF_ERROR(CheckChainGroup(g, group_of_node, group,
                                        out.chain.nodes, out.chain.outs,
                                        MixrtOpName(skeleton.op)));
  out.implementation = skeleton.implementation(g, out.chain, out.nodes.size());
  if (!Optimized(out.implementation)) {
    return absl::UnimplementedError(absl::StrCat(
        "oneDNN runs this ", skeleton.product,
        "'s post-ops on no optimized kernel (", out.implementation, ")"));
  }
  return out;
}

// The kernel of claimed group `group`: begun, then made.
template <typename Chain>
absl::StatusOr<std::unique_ptr<sdk::FusedKernel>> CompileEpilogues(
    const EpilogueSkeleton<Chain>& skeleton, const sdk::FusionGraph& g,
    absl::Span<const int> group_of_node, int group) {
  MIXRT_ASSIGN_OR_RETURN(EpilogueGroup<Chain> begun,
                         BeginEpilogueGroup(skeleton, g, group_of_node, group));
  return skeleton.make(g, std::move(begun));
}

// A skeleton's claim and compile, as the pattern table takes them.
struct EpiloguePattern {
  std::vector<int> (*claim)(const sdk::FusionGraph& g,
                            absl::Span<const int> taken, int first);
  absl::StatusOr<std::unique_ptr<sdk::FusedKernel>> (*compile)(
      const sdk::FusionGraph& g, absl::Span<const int> group_of_node,
      int group);
};

template <const auto& kSkeleton>
constexpr EpiloguePattern EpiloguePatternOf() {
  return {[](const sdk::FusionGraph& g, absl::Span<const int> taken,
             int first) { return ClaimEpilogues(kSkeleton, g, taken, first); },
          [](const sdk::FusionGraph& g, absl::Span<const int> group_of_node,
             int group) {
            return CompileEpilogues(kSkeleton, g, group_of_node, group);
          }};
}

}  // namespace mixrt::cpu

#endif  // MIXRT_BACKENDS_CPU_FUSION_EPILOGUE_CHAIN_H_
