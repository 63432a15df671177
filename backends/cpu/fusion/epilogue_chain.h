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
#include "absl/types/span.h"
#include "backends/cpu/kernels/epilogue.h"
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

}  // namespace mixrt::cpu

#endif  // MIXRT_BACKENDS_CPU_FUSION_EPILOGUE_CHAIN_H_
