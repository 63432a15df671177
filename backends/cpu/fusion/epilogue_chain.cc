#include "backends/cpu/fusion/epilogue_chain.h"

#include <algorithm>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "backends/cpu/fusion/fused_matmul.h"
#include "plugins/sdk/plugin.h"
#include "plugins/sdk/pointwise_math.h"

namespace mixrt::cpu {
namespace {

using sdk::FusionGraph;
using sdk::FusionNode;

std::string AlgorithmName(dnnl::algorithm a) {
  switch (a) {
    case dnnl::algorithm::eltwise_relu:
      return "relu";
    case dnnl::algorithm::eltwise_gelu_erf:
      return "gelu_erf";
    case dnnl::algorithm::eltwise_gelu_tanh:
      return "gelu_tanh";
    case dnnl::algorithm::eltwise_swish:
      return "swish";
    case dnnl::algorithm::eltwise_logistic:
      return "logistic";
    case dnnl::algorithm::eltwise_tanh:
      return "tanh";
    case dnnl::algorithm::eltwise_linear:
      return "linear";
    case dnnl::algorithm::binary_add:
      return "binary_add";
    case dnnl::algorithm::binary_sub:
      return "binary_sub";
    case dnnl::algorithm::binary_mul:
      return "binary_mul";
    default:
      return "post-op";
  }
}

}  // namespace

std::optional<ChainStep> EltwiseFor(uint32_t kind, float alpha, float beta) {
  ChainStep s;
  switch (kind) {
    case MIXRT_UNARY_RELU:
      s.algorithm = dnnl::algorithm::eltwise_relu;
      break;
    case MIXRT_UNARY_LEAKY_RELU:
      s.algorithm = dnnl::algorithm::eltwise_relu;
      s.alpha = alpha;
      break;
    case MIXRT_UNARY_GELU:
      s.algorithm = dnnl::algorithm::eltwise_gelu_erf;
      break;
    case MIXRT_UNARY_GELU_TANH:
      s.algorithm = dnnl::algorithm::eltwise_gelu_tanh;
      break;
    case MIXRT_UNARY_SILU:
      s.algorithm = dnnl::algorithm::eltwise_swish;
      s.alpha = 1;
      break;
    case MIXRT_UNARY_SIGMOID:
      s.algorithm = dnnl::algorithm::eltwise_logistic;
      break;
    case MIXRT_UNARY_TANH:
      s.algorithm = dnnl::algorithm::eltwise_tanh;
      break;
    case MIXRT_UNARY_SCALE:
      s.algorithm = dnnl::algorithm::eltwise_linear;
      s.alpha = alpha;
      s.beta = beta;
      break;
    default:
      return std::nullopt;
  }
  if (!PostOpKeepsSpecials(s.algorithm, s.alpha, s.beta, kind))
    return std::nullopt;
  s.name = AlgorithmName(s.algorithm);
  return s;
}

std::optional<ChainStep> StepFor(const FusionGraph& g, const FusionNode& n,
                                 int v, OperandFits fits, bool* cast) {
  *cast = false;
  if (n.outputs.size() != 1 || n.attrs_extended) return std::nullopt;
  switch (n.op) {
    case MIXRT_OP_COPY:
      if (n.inputs.size() != 1 || n.inputs[0] != v) return std::nullopt;
      *cast = true;
      return ChainStep{};
    case MIXRT_OP_UNARY: {
      if (n.inputs.size() != 1 || n.inputs[0] != v) return std::nullopt;
      auto attrs = n.GetAttrs<MixrtPointwiseAttrs>();
      if (!attrs.ok()) return std::nullopt;
      return EltwiseFor(attrs->kind, static_cast<float>(attrs->alpha),
                        static_cast<float>(attrs->beta));
    }
    case MIXRT_OP_BINARY: {
      if (n.inputs.size() != 2 || n.inputs[0] == n.inputs[1])
        return std::nullopt;
      auto attrs = n.GetAttrs<MixrtPointwiseAttrs>();
      if (!attrs.ok()) return std::nullopt;
      const bool first = n.inputs[0] == v;
      if (!first && n.inputs[1] != v) return std::nullopt;
      ChainStep s;
      s.operand = n.inputs[first ? 1 : 0];
      switch (attrs->kind) {
        case MIXRT_BINARY_ADD:
          s.algorithm = dnnl::algorithm::binary_add;
          break;
        case MIXRT_BINARY_MUL:
          s.algorithm = dnnl::algorithm::binary_mul;
          break;
        case MIXRT_BINARY_SUB:
          if (!first) return std::nullopt;  // other - v is no post-op.
          s.algorithm = dnnl::algorithm::binary_sub;
          break;
        default:
          return std::nullopt;
      }
      if (!fits(g.values[s.operand], g.values[n.outputs[0]])) {
        return std::nullopt;
      }
      s.name = AlgorithmName(s.algorithm);
      return s;
    }
    default:
      return std::nullopt;
  }
}

bool IsUnaryOf(const FusionNode& n, int v, uint32_t kind) {
  if (n.op != MIXRT_OP_UNARY || n.inputs.size() != 1 || n.inputs[0] != v ||
      n.outputs.size() != 1 || n.attrs_extended) {
    return false;
  }
  auto attrs = n.GetAttrs<MixrtPointwiseAttrs>();
  return attrs.ok() && attrs->kind == kind;
}

void BindChain(const FusionGraph& g, const std::vector<int>& leading, int bias,
               absl::Span<const ChainStep> steps,
               const std::vector<int>& described, absl::Span<void* const> data,
               BoundChain* out) {
  // Sized first, so that the TensorRefs' pointers into `descs` stay valid.
  std::vector<int> values = leading;
  if (bias >= 0) values.push_back(bias);
  for (const ChainStep& s : steps) {
    if (s.operand >= 0) values.push_back(s.operand);
  }
  const size_t with_memory = values.size();
  values.insert(values.end(), described.begin(), described.end());
  out->descs.clear();
  for (size_t i = 0; i < values.size(); ++i) {
    const bool memory = !data.empty() && i < with_memory;
    out->descs.push_back(
        g.values[values[i]].Desc(memory ? data[values[i]] : nullptr));
  }
  out->refs.clear();
  for (const MixrtTensorDesc& d : out->descs) out->refs.emplace_back(d);
  out->bias = bias >= 0 ? &out->refs[leading.size()] : nullptr;
  out->steps.clear();
  size_t next = leading.size() + (bias >= 0 ? 1 : 0);
  for (const ChainStep& s : steps) {
    out->steps.push_back({s.algorithm, s.alpha, s.beta,
                          s.operand >= 0 ? &out->refs[next++] : nullptr});
  }
}

bool Optimized(const std::string& implementation) {
  return !implementation.empty() && !absl::StartsWith(implementation, "ref");
}

size_t LongestFusablePrefix(
    const FusionGraph& g, MixrtDtype operands, const std::vector<int>& outs,
    const std::vector<size_t>& steps_upto, bool packs_weights,
    const std::function<std::string(size_t)>& implementation) {
  for (size_t n = outs.size(); n >= 1; --n) {
    const MixrtDtype d = g.values[outs[n - 1]].dtype;
    if (d != MIXRT_DTYPE_F32 && d != operands) continue;
    if (steps_upto[n - 1] == 0 && (!packs_weights || n > 1)) continue;
    if (Optimized(implementation(n))) return n;
  }
  return 0;
}

absl::Status CheckChainGroup(const FusionGraph& g,
                             absl::Span<const int> group_of_node, int group,
                             const std::vector<int>& nodes,
                             const std::vector<int>& outs,
                             const std::string& what) {
  const std::vector<int> grouped =
      FusionGraph::GroupNodes(group_of_node, group);
  if (grouped.empty() || nodes.size() < grouped.size() ||
      !std::equal(grouped.begin(), grouped.end(), nodes.begin())) {
    return absl::InvalidArgumentError(
        absl::StrCat("fused ", what, ": the group is not a ", what,
                     " and the chain only it feeds"));
  }
  if (g.GroupStores(group_of_node, group) !=
      std::vector<int>{outs[grouped.size() - 1]}) {
    return absl::InvalidArgumentError(absl::StrCat(
        "fused ", what, ": a value inside the chain is read outside it"));
  }
  return absl::OkStatus();
}

}  // namespace mixrt::cpu
