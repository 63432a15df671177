#include "backends/cpu/fusion/fused_matmul.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <mutex>
#include <optional>
#include <tuple>
#include <utility>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "backends/cpu/fusion/epilogue_chain.h"
#include "backends/cpu/fusion/weight_pack_state.h"
#include "backends/cpu/gemm/small_gemm.h"
#include "backends/cpu/kernels/cpu_matmul.h"
#include "backends/cpu/kernels/dense_call.h"
#include "mixrt/op_names.h"
#include "mixrt/status_macros.h"
#include "plugins/sdk/plugin.h"
#include "plugins/sdk/pointwise_math.h"

namespace mixrt::cpu {
namespace {

using sdk::FusionGraph;
using sdk::FusionNode;
using sdk::FusionValue;
using sdk::TensorRef;

// Ops after the matmul one group takes (oneDNN allows more post-ops; a
// transformer's longest chain is cast + residual add).
constexpr size_t kMaxChain = 4;

// A matmul and the chain it feeds, as far as it fuses.
struct Chain {
  int a = -1, b = -1, bias = -1;
  // b when it is a WEIGHT (packed once per version), or -1.
  int weight = -1;
  std::vector<int> nodes;          // The matmul first.
  std::vector<ChainStep> steps;    // Post-ops.
  std::vector<size_t> steps_upto;  // Per node: steps its prefix has.
  std::vector<int> outs;           // Per node: its output value.
};

// How a binary op's other operand may be laid out against the chain's
// value `like` (contiguous): like's own strides, a row broadcast over the
// leading dims, or one element everywhere.
bool BroadcastLayoutFits(const FusionValue& v, const FusionValue& like) {
  if (!v.is_static() || v.shape != like.shape ||
      !sdk::IsFloatingDtype(v.dtype) || v.dtype == MIXRT_DTYPE_F16) {
    return false;
  }
  if (v.strides == like.strides) return true;
  const size_t nd = v.shape.size();
  for (size_t d = 0; d + 1 < nd; ++d) {
    if (v.strides[d] != 0 && v.shape[d] != 1) return false;
  }
  return nd == 0 || v.strides[nd - 1] == 0 || v.strides[nd - 1] == 1;
}

// The chain prefix of `nodes` nodes: a, b, out, bias, then the operands.
void Bind(const FusionGraph& g, const Chain& c, size_t nodes,
          absl::Span<void* const> data, BoundChain* out) {
  BindChain(g, {c.a, c.b, c.outs[nodes - 1]}, c.bias,
            {c.steps.data(), c.steps_upto[nodes - 1]}, {}, data, out);
}

// The chain from matmul node `i`: empty nodes when the matmul itself is
// not one this fusion takes.
Chain FollowChain(const FusionGraph& g, int i) {
  Chain c;
  const FusionNode& m = g.nodes[i];
  if (m.op != MIXRT_OP_MATMUL || m.inputs.size() < 2 || m.inputs.size() > 3 ||
      m.outputs.size() != 1 || m.attrs_extended) {
    return c;
  }
  auto attrs = m.GetAttrs<MixrtMatmulAttrs>();
  if (!attrs.ok() || attrs->beta != 0) return c;
  const FusionValue& a = g.values[m.inputs[0]];
  const FusionValue& b = g.values[m.inputs[1]];
  const FusionValue& out = g.values[m.outputs[0]];
  if (!a.is_static() || !b.is_static() || !out.is_static() ||
      !out.is_contiguous() || a.dtype != b.dtype ||
      !sdk::IsFloatingDtype(a.dtype) || !OneDnnHasMatmul(a.dtype) ||
      (a.dtype == MIXRT_DTYPE_F16 && F16MatmulByBf16Pairs()) ||
      out.shape.size() < 2) {
    return c;
  }
  const size_t nd = out.shape.size();
  int64_t rows = 1;
  for (size_t d = 0; d + 1 < nd; ++d) rows *= out.shape[d];
  // The small f32 tiles beat oneDNN there, and apply a relu themselves.
  if (a.dtype == MIXRT_DTYPE_F32 &&
      SmallGemmApplies(rows, out.shape[nd - 1], a.shape[nd - 1])) {
    return c;
  }
  c.a = m.inputs[0];
  c.b = m.inputs[1];
  c.bias = m.inputs.size() == 3 ? m.inputs[2] : -1;
  // A WEIGHT is an input of the offer, never a view of another value.
  if (b.has(MIXRT_FUSION_VALUE_WEIGHT)) c.weight = c.b;
  c.nodes.push_back(i);
  c.outs.push_back(m.outputs[0]);
  if (attrs->activation != MIXRT_ACTIVATION_NONE) {
    static const uint32_t kKinds[] = {0, MIXRT_UNARY_RELU, MIXRT_UNARY_GELU,
                                      MIXRT_UNARY_GELU_TANH};
    std::optional<ChainStep> s =
        attrs->activation < 4 ? EltwiseFor(kKinds[attrs->activation], 0, 0)
                              : std::nullopt;
    if (!s.has_value()) {
      c.nodes.clear();
      return c;
    }
    c.steps.push_back(*s);
  }
  c.steps_upto.push_back(c.steps.size());
  int v = m.outputs[0];
  while (c.nodes.size() <= kMaxChain) {
    const FusionValue& val = g.values[v];
    if (val.has(MIXRT_FUSION_VALUE_OUTPUT) || g.readers[v].size() != 1) break;
    const int r = g.readers[v][0];
    const FusionNode& n = g.nodes[r];
    bool cast = false;
    std::optional<ChainStep> s = StepFor(g, n, v, BroadcastLayoutFits, &cast);
    if (!s.has_value()) break;
    const FusionValue& next = g.values[n.outputs[0]];
    if (!next.is_static() || next.shape != val.shape || !next.is_contiguous() ||
        !sdk::IsFloatingDtype(next.dtype)) {
      break;
    }
    if (!cast) c.steps.push_back(*s);
    c.nodes.push_back(r);
    c.outs.push_back(n.outputs[0]);
    c.steps_upto.push_back(c.steps.size());
    v = n.outputs[0];
  }
  return c;
}

// oneDNN's implementation for the chain's first `nodes` nodes.
std::string Implementation(const FusionGraph& g, const Chain& c, size_t nodes) {
  BoundChain bound;
  Bind(g, c, nodes, {}, &bound);
  return MatmulWithEpilogueImplementation(bound.refs[0], bound.refs[1],
                                          bound.bias, bound.refs[2],
                                          bound.steps, c.weight >= 0);
}

// LongestFusablePrefix of the matmul's chain. A chain of casts alone is
// left op by op: it would save one pass for a change of rounding (the
// product widened before its bf16 rounding), which a gradient feeding an
// optimizer should not get silently.
size_t FusablePrefix(const FusionGraph& g, const Chain& c) {
  return LongestFusablePrefix(
      g, g.values[c.a].dtype, c.outs, c.steps_upto, c.weight >= 0,
      [&](size_t n) { return Implementation(g, c, n); });
}

class FusedMatmul : public sdk::FusedKernel {
 public:
  FusedMatmul(FusionGraph graph, Chain chain, size_t nodes,
              std::string description)
      : graph_(std::move(graph)),
        chain_(std::move(chain)),
        nodes_(nodes),
        description_(std::move(description)) {}

  sdk::Status Run(sdk::Span<void* const> value_data,
                  sdk::Span<const int64_t>) override {
    Bind(graph_, chain_, nodes_, value_data, &bound_);
    const auto run = [&](const dnnl::memory* packed) {
      return RunMatmulWithEpilogue(bound_.refs[0], bound_.refs[1], bound_.bias,
                                   bound_.refs[2], bound_.steps, packed);
    };
    if (chain_.weight < 0 || !pack_.Packs()) return run(nullptr);
    return pack_.RunPacked(
        false, [&](bool from_copy) { return Pack(value_data, from_copy); },
        [&] { return run(&packed_); });
  }

  void SetWeightVersion(int value, uint64_t version) override {
    if (value == chain_.weight) pack_.SetVersion(version);
  }

  bool KeepsCopyOf(int value) const override {
    return value == chain_.weight && pack_.Packs();
  }

  std::string Description() const override { return description_; }

 private:
  absl::Status Pack(absl::Span<void* const> value_data, bool from_copy) {
    if (from_copy && packed_) {
      // Only the layout changed: the copy is laid out again, never read
      // from the weight, whose memory the host may have released.
      const dnnl::memory old = packed_;
      packed_ = dnnl::memory();
      return RepackMatmulWeights(bound_.refs[0], bound_.refs[1], bound_.bias,
                                 bound_.refs[2], bound_.steps, old, &packed_);
    }
    if (value_data[chain_.weight] == nullptr) {
      return absl::InvalidArgumentError("fused matmul: no weight address");
    }
    return PackMatmulWeights(bound_.refs[0], bound_.refs[1], bound_.bias,
                             bound_.refs[2], bound_.steps, &packed_);
  }

  const FusionGraph graph_;
  const Chain chain_;
  const size_t nodes_;
  const std::string description_;
  BoundChain bound_;  // Reused by each run (runs never overlap).
  WeightPackState pack_;
  dnnl::memory packed_;
};

}  // namespace

bool PostOpKeepsSpecials(dnnl::algorithm algorithm, float alpha, float beta,
                         uint32_t kind) {
  static std::mutex mu;
  static std::map<std::tuple<int, float, float, uint32_t>, bool> known;
  const auto key =
      std::make_tuple(static_cast<int>(algorithm), alpha, beta, kind);
  std::lock_guard<std::mutex> lock(mu);
  auto it = known.find(key);
  if (it != known.end()) return it->second;
  // x times 1 through the post-op, for each special x, against the op.
  const float inf = std::numeric_limits<float>::infinity();
  float a[3] = {std::numeric_limits<float>::quiet_NaN(), inf, -inf};
  float b[1] = {1.0f}, c[3] = {0, 0, 0};
  const int64_t a_shape[2] = {3, 1}, a_strides[2] = {1, 1};
  const int64_t b_shape[2] = {1, 1}, b_strides[2] = {1, 1};
  MixrtTensorDesc ad{sizeof(MixrtTensorDesc),
                     nullptr,
                     a,
                     MIXRT_DTYPE_F32,
                     2,
                     a_shape,
                     a_strides};
  MixrtTensorDesc bd{sizeof(MixrtTensorDesc),
                     nullptr,
                     b,
                     MIXRT_DTYPE_F32,
                     2,
                     b_shape,
                     b_strides};
  MixrtTensorDesc cd{sizeof(MixrtTensorDesc),
                     nullptr,
                     c,
                     MIXRT_DTYPE_F32,
                     2,
                     a_shape,
                     a_strides};
  const EpilogueStep step{algorithm, alpha, beta, nullptr};
  bool keeps = RunMatmulWithEpilogue(TensorRef(ad), TensorRef(bd), nullptr,
                                     TensorRef(cd), {&step, 1})
                   .ok();
  for (int i = 0; keeps && i < 3; ++i) {
    const float want = sdk::ApplyUnary<float>(static_cast<MixrtUnaryKind>(kind),
                                              a[i], alpha, beta);
    keeps = std::isnan(want) ? std::isnan(c[i]) : c[i] == want;
  }
  known.emplace(key, keeps);
  return keeps;
}

namespace {

absl::StatusOr<std::unique_ptr<sdk::FusedKernel>> MakeFusedMatmul(
    const FusionGraph& g, EpilogueGroup<Chain> begun) {
  const size_t length = begun.nodes.size();
  Chain& c = begun.chain;
  std::vector<std::string> names;
  for (size_t i = 0; i < c.steps_upto[length - 1]; ++i)
    names.push_back(c.steps[i].name);
  const std::string description = absl::StrCat(
      "oneDNN matmul", c.weight >= 0 ? " (weights packed per version)" : "",
      names.empty() ? "" : " + post-ops ", absl::StrJoin(names, ", "), " -> ",
      DtypeName(g.values[c.outs[length - 1]].dtype), " (", begun.implementation,
      ")");
  return std::make_unique<FusedMatmul>(g, std::move(c), length, description);
}

const EpilogueSkeleton<Chain> kMatmulSkeleton = {
    MIXRT_OP_MATMUL, "matmul",       "matmul",       FollowChain,
    FusablePrefix,   Implementation, MakeFusedMatmul};

}  // namespace

const EpiloguePattern kMatmulEpilogues = EpiloguePatternOf<kMatmulSkeleton>();

}  // namespace mixrt::cpu
