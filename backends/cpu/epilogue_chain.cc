#include "backends/cpu/epilogue_chain.h"

#include "backends/cpu/fused_matmul.h"
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
  if (!PostOpKeepsSpecials(s.algorithm, s.alpha, s.beta, kind)) return std::nullopt;
  s.name = AlgorithmName(s.algorithm);
  return s;
}

std::optional<ChainStep> StepFor(const FusionGraph& g, const FusionNode& n, int v,
                                 OperandFits fits, bool* cast) {
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
      if (n.inputs.size() != 2 || n.inputs[0] == n.inputs[1]) return std::nullopt;
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

}  // namespace mixrt::cpu
