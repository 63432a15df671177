#include "backends/cpu/fusion/fused_conv.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <utility>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "backends/cpu/fusion/epilogue_chain.h"
#include "backends/cpu/fusion/weight_pack_state.h"
#include "backends/cpu/kernels/cpu_conv.h"
#include "backends/cpu/kernels/cpu_kernels.h"
#include "backends/cpu/kernels/cpu_matmul.h"
#include "backends/cpu/kernels/dense_call.h"
#include "backends/cpu/kernels/epilogue.h"
#include "backends/cpu/kernels/max_magnitude.h"
#include "mixrt/status_macros.h"
#include "plugins/sdk/plugin.h"

namespace mixrt::cpu {
namespace {

using sdk::FusionGraph;
using sdk::FusionNode;
using sdk::FusionValue;
using sdk::TensorRef;

// Nodes after the conv one group takes: an autocast eval batch_norm's
// chain is cast, scale, shift, cast, relu.
constexpr size_t kMaxChain = 6;

// The bound below which a guarded relu is a post-op: FLT_MAX with room for
// the rounding of the partial sums (each within a factor 1 + 2^-24 of
// exact per addition, well under 3.4 for any real reduction length).
constexpr double kNoOverflowBound = 1e38;

// A binary step's operand: one element, or one per channel of the conv's
// [N, C, H, W] output (an eval batch_norm's scale or shift).
bool PerChannelFits(const FusionValue& v, const FusionValue& like) {
  if (!v.is_static() || v.shape != like.shape || v.shape.size() != 4 ||
      (v.dtype != MIXRT_DTYPE_F32 && v.dtype != MIXRT_DTYPE_BF16)) {
    return false;
  }
  for (int d : {0, 2, 3}) {
    if (v.strides[d] != 0 && v.shape[d] != 1) return false;
  }
  return v.strides[1] == 0 || v.strides[1] == 1 || v.shape[1] == 1;
}

struct ConvChain {
  int x = -1, w = -1, bias = -1;
  int weight = -1;  // w when it is a WEIGHT (packed once per version), or -1.
  MixrtConvAttrs attrs{};
  std::vector<int> nodes;          // The conv first.
  std::vector<ChainStep> steps;    // Post-ops.
  std::vector<size_t> steps_upto;  // Per node: steps its prefix has.
  std::vector<int> outs;           // Per node: its output value.
  int guarded = -1;                // The step that is a guarded relu, or -1.
  int pool = -1;                   // The max pool node ending the chain, or -1.
  MixrtPoolAttrs pool_attrs{};
};

bool IsF32OrBf16(MixrtDtype d) {
  return d == MIXRT_DTYPE_F32 || d == MIXRT_DTYPE_BF16;
}

// The chain from conv node `i`: empty nodes when the conv itself is not one
// this fusion takes.
ConvChain FollowChain(const FusionGraph& g, int i) {
  ConvChain c;
  const FusionNode& m = g.nodes[i];
  if (m.op != MIXRT_OP_CONV2D || m.inputs.size() < 2 || m.inputs.size() > 3 ||
      m.outputs.size() != 1 || m.attrs_extended) {
    return c;
  }
  auto attrs = m.GetAttrs<MixrtConvAttrs>();
  if (!attrs.ok() || attrs->activation != MIXRT_ACTIVATION_NONE ||
      attrs->groups < 1)
    return c;
  const FusionValue& x = g.values[m.inputs[0]];
  const FusionValue& w = g.values[m.inputs[1]];
  const FusionValue& out = g.values[m.outputs[0]];
  if (!x.is_static() || !w.is_static() || !out.is_static() ||
      !x.is_contiguous() || !out.is_contiguous() || x.shape.size() != 4 ||
      w.shape.size() != 4 || x.dtype != w.dtype || out.dtype != x.dtype ||
      !IsF32OrBf16(x.dtype) || !OneDnnHasMatmul(x.dtype)) {
    return c;
  }
  if (m.inputs.size() == 3) {
    const FusionValue& b = g.values[m.inputs[2]];
    if (!b.is_static() || b.shape.size() != 1 || !IsF32OrBf16(b.dtype))
      return c;
    c.bias = m.inputs[2];
  }
  c.x = m.inputs[0];
  c.w = m.inputs[1];
  c.attrs = *attrs;
  if (w.has(MIXRT_FUSION_VALUE_WEIGHT)) c.weight = c.w;
  c.nodes.push_back(i);
  c.outs.push_back(m.outputs[0]);
  c.steps_upto.push_back(0);
  // Until the guarded relu, steps whose bound the run can carry (binary
  // steps and linear eltwise); after it, casts only (they commute with it).
  // `boundable`: every step but the relu is one.
  bool boundable = true;
  int v = m.outputs[0];
  while (c.nodes.size() <= kMaxChain) {
    const FusionValue& val = g.values[v];
    if (val.has(MIXRT_FUSION_VALUE_OUTPUT) || g.readers[v].size() != 1) break;
    const int r = g.readers[v][0];
    const FusionNode& n = g.nodes[r];
    bool cast = false;
    std::optional<ChainStep> s = StepFor(g, n, v, PerChannelFits, &cast);
    if (!s.has_value() && c.guarded < 0 && boundable &&
        IsUnaryOf(n, v, MIXRT_UNARY_RELU)) {
      s = ChainStep{dnnl::algorithm::eltwise_relu, 0, 0, -1, "relu (guarded)"};
      c.guarded = static_cast<int>(c.steps.size());
    } else if (!s.has_value() || (c.guarded >= 0 && !cast)) {
      break;
    }
    const FusionValue& next = g.values[n.outputs[0]];
    // A cast through f16 would overflow op by op where the chain does not.
    if (!next.is_static() || next.shape != val.shape || !next.is_contiguous() ||
        !IsF32OrBf16(next.dtype)) {
      if (c.guarded == static_cast<int>(c.steps.size())) c.guarded = -1;
      break;
    }
    if (!cast) {
      boundable =
          boundable &&
          (c.guarded == static_cast<int>(c.steps.size()) || s->operand >= 0 ||
           s->algorithm == dnnl::algorithm::eltwise_linear);
      c.steps.push_back(*s);
    }
    c.nodes.push_back(r);
    c.outs.push_back(n.outputs[0]);
    c.steps_upto.push_back(c.steps.size());
    v = n.outputs[0];
  }
  // A max pool reading the result: oneDNN pools the convolution's blocked
  // result before it is reordered (a 4x smaller reorder), where the bound
  // proves the values finite (its max drops NaN).
  const FusionValue& last = g.values[v];
  if (!boundable || last.has(MIXRT_FUSION_VALUE_OUTPUT) ||
      g.readers[v].size() != 1)
    return c;
  const int r = g.readers[v][0];
  const FusionNode& n = g.nodes[r];
  if (n.op != MIXRT_OP_POOL2D || n.inputs.size() != 1 ||
      n.outputs.size() != 1 || n.attrs_extended) {
    return c;
  }
  auto pool = n.GetAttrs<MixrtPoolAttrs>();
  const FusionValue& pooled = g.values[n.outputs[0]];
  if (!pool.ok() || pool->kind != MIXRT_POOL_MAX || !pooled.is_static() ||
      !pooled.is_contiguous() || pooled.dtype != last.dtype ||
      pooled.shape.size() != 4) {
    return c;
  }
  c.pool = r;
  c.pool_attrs = *pool;
  c.nodes.push_back(r);
  c.outs.push_back(n.outputs[0]);
  c.steps_upto.push_back(c.steps.size());
  return c;
}

// Whether the first `nodes` nodes of the chain end with its pool.
bool HasPool(const ConvChain& c, size_t nodes) {
  return c.pool >= 0 && nodes == c.nodes.size();
}

// The chain prefix of `nodes` nodes: x, w, out, bias, the operands, then
// (with a pool) the convolution's result, which has no memory.
struct Bound : BoundChain {
  const TensorRef* conv_out = nullptr;  // refs[2] without a pool.
};

void Bind(const FusionGraph& g, const ConvChain& c, size_t nodes,
          absl::Span<void* const> data, Bound* out) {
  const bool pool = HasPool(c, nodes);
  BindChain(g, {c.x, c.w, c.outs[nodes - 1]}, c.bias,
            {c.steps.data(), c.steps_upto[nodes - 1]},
            pool ? std::vector<int>{c.outs[nodes - 2]} : std::vector<int>{},
            data, out);
  out->conv_out = pool ? &out->refs.back() : &out->refs[2];
}

std::string Implementation(const FusionGraph& g, const ConvChain& c,
                           size_t nodes) {
  Bound bound;
  Bind(g, c, nodes, {}, &bound);
  if (HasPool(c, nodes)) {
    return ConvMaxPoolImplementation(bound.refs[0], bound.refs[1], bound.bias,
                                     *bound.conv_out, bound.refs[2], c.attrs,
                                     bound.steps, c.pool_attrs);
  }
  return ConvWithEpilogueImplementation(bound.refs[0], bound.refs[1],
                                        bound.bias, bound.refs[2], c.attrs,
                                        bound.steps);
}

// LongestFusablePrefix of the conv's chain.
size_t FusablePrefix(const FusionGraph& g, const ConvChain& c) {
  return LongestFusablePrefix(
      g, g.values[c.x].dtype, c.outs, c.steps_upto, c.weight >= 0,
      [&](size_t n) { return Implementation(g, c, n); });
}

// The group's leading steps that are per-channel affine (binary steps on
// a per-channel or scalar operand, linear eltwise): they fold into the
// weights and bias, which needs the weights dense to rewrite them. Binary
// post-ops slowed oneDNN's convolutions (the 3-channel stem's 2.2x here);
// a bias costs nothing.
size_t FoldedSteps(const FusionGraph& g, const ConvChain& c, size_t nodes) {
  if (!g.values[c.w].is_contiguous()) return 0;
  const size_t steps = c.steps_upto[nodes - 1];
  size_t n = 0;
  while (n < steps &&
         (c.steps[n].operand >= 0 ||
          c.steps[n].algorithm == dnnl::algorithm::eltwise_linear)) {
    ++n;
  }
  return n;
}

class FusedConv : public sdk::FusedKernel {
 public:
  FusedConv(const FusionGraph& graph, ConvChain chain, size_t nodes,
            std::string description)
      : graph_(graph),
        chain_(std::move(chain)),
        nodes_(nodes),
        relu_(chain_.guarded >= 0 && static_cast<size_t>(chain_.guarded) <
                                         chain_.steps_upto[nodes_ - 1]
                  ? chain_.guarded
                  : -1),
        affine_(FoldedSteps(graph, chain_, nodes_)),
        pool_(HasPool(chain_, nodes_)),
        description_(std::move(description)) {}

  sdk::Status Run(sdk::Span<void* const> value_data,
                  sdk::Span<const int64_t>) override {
    Bind(graph_, chain_, nodes_, value_data, &bound_);
    const TensorRef& x = bound_.refs[0];
    const TensorRef& y = bound_.refs[2];
    absl::Span<const EpilogueStep> steps = bound_.steps;
    // Folding, the relu post-op and oneDNN's max pool hold only while no
    // step can meet a NaN or an infinity; otherwise the chain runs as it
    // is written.
    const int bounded = relu_ >= 0 ? relu_
                        : pool_    ? static_cast<int>(steps.size())
                                   : affine_;
    if ((relu_ >= 0 || affine_ > 0 || pool_) && !Finite(bounded))
      return RunAsWritten();
    steps.remove_prefix(affine_);
    const TensorRef* weights = &bound_.refs[1];
    const TensorRef* bias = bound_.bias;
    if (affine_ > 0) {
      FoldedScaleAndBias();
      bias = &folded_bias_;
      if (scale_ != packed_scale_) pack_.Forget();
    }
    const auto run = [&](const dnnl::memory* packed) {
      return pool_ ? RunConvMaxPoolWithEpilogue(
                         x, *weights, bias, *bound_.conv_out, y, chain_.attrs,
                         steps, chain_.pool_attrs, &between_, packed)
                   : RunConvWithEpilogue(x, *weights, bias, y, chain_.attrs,
                                         steps, packed);
    };
    if (chain_.weight < 0 || !pack_.Packs()) {
      if (affine_ > 0) weights = &FoldWeights();
      return run(nullptr);
    }
    // The conv never keeps a copy for the host (folding may need the
    // weight again), so it always packs from the weight.
    const auto pack = [&](bool /*from_copy*/) -> absl::Status {
      if (affine_ > 0) weights = &FoldWeights();
      MIXRT_RETURN_IF_ERROR(PackConvWeights(x, *weights, bias, *bound_.conv_out,
                                            chain_.attrs, steps, &packed_));
      packed_steps_ = steps.size();
      packed_scale_ = scale_;
      return absl::OkStatus();
    };
    // A guarded relu's run that fell back chose another primitive.
    return pack_.RunPacked(packed_steps_ != steps.size(), pack,
                           [&] { return run(&packed_); });
  }

  void SetWeightVersion(int value, uint64_t version) override {
    if (value != chain_.weight) return;
    pack_.SetVersion(version);
    weight_version_ = version;
  }

  std::string Description() const override { return description_; }

 private:
  // max |w|, scanned once per weight version (every run when no version
  // was told): the bound's only term proportional to the weight's size.
  double WeightMagnitude() {
    if (!weight_version_.has_value() || magnitude_for_ != weight_version_) {
      weight_magnitude_ = MaxMagnitude(bound_.refs[1]);
      magnitude_for_ = weight_version_;
    }
    return weight_magnitude_;
  }

  // The chain's steps as post-ops on the weights as they are, then the
  // relu that keeps NaN (casts after it commute with it) and the pool
  // that does.
  absl::Status RunAsWritten() {
    const TensorRef& x = bound_.refs[0];
    absl::Span<const EpilogueStep> steps = bound_.steps;
    if (relu_ >= 0) steps = steps.first(relu_);
    TensorRef conv_out = *bound_.conv_out;
    MixrtTensorDesc unpooled;
    if (pool_) {
      unpooled = *conv_out.desc();
      unpooled_data_.resize(static_cast<size_t>(conv_out.numel()) *
                            (conv_out.dtype() == MIXRT_DTYPE_F32 ? 4 : 2));
      unpooled.data = unpooled_data_.data();
      conv_out = TensorRef(unpooled);
    }
    MIXRT_RETURN_IF_ERROR(RunConvWithEpilogue(x, bound_.refs[1], bound_.bias,
                                              conv_out, chain_.attrs, steps));
    if (relu_ >= 0) ActivateInPlace(conv_out, MIXRT_ACTIVATION_RELU);
    if (!pool_) return absl::OkStatus();
    sdk::KernelCall call;
    call.op = MIXRT_OP_POOL2D;
    call.inputs.push_back(conv_out);
    call.outputs.push_back(bound_.refs[2]);
    call.attrs = &chain_.pool_attrs;
    return RunKernel(call);
  }

  // Whether the value after steps [0, end) is finite for sure: every
  // operand finite and the bound of its magnitude (fused_conv.h) below
  // overflow. Those steps are binary or linear (the claim allowed no
  // other before a guarded relu).
  bool Finite(int end) {
    const TensorRef& w = bound_.refs[1];
    const double taps = static_cast<double>(w.dim(1)) * w.dim(2) * w.dim(3);
    double bound = MaxMagnitude(bound_.refs[0]) * WeightMagnitude() * taps;
    if (bound_.bias != nullptr) bound += MaxMagnitude(*bound_.bias);
    for (int i = 0; i < end; ++i) {
      const EpilogueStep& s = bound_.steps[i];
      if (s.operand == nullptr) {
        bound = std::fabs(s.alpha) * bound + std::fabs(s.beta);
      } else if (s.algorithm == dnnl::algorithm::binary_mul) {
        bound *= MaxMagnitude(*s.operand);
      } else {
        bound += MaxMagnitude(*s.operand);
      }
    }
    return bound < kNoOverflowBound;  // False for NaN too.
  }

  // scale_ and the bias that with it makes the affine steps:
  // steps(conv + bias) = conv * scale + (bias * scale + shift), per channel.
  void FoldedScaleAndBias() {
    const int64_t channels = bound_.refs[2].dim(1);
    scale_.assign(channels, 1.0f);
    bias_.assign(channels, 0.0f);
    if (bound_.bias != nullptr) {
      for (int64_t c = 0; c < channels; ++c) {
        bias_[c] = bound_.bias->LoadFloat(c * bound_.bias->stride(0));
      }
    }
    for (size_t i = 0; i < affine_; ++i) {
      const EpilogueStep& s = bound_.steps[i];
      for (int64_t c = 0; c < channels; ++c) {
        float k = 1, add = 0;
        if (s.operand == nullptr) {
          k = s.alpha;
          add = s.beta;
        } else {
          const float v = s.operand->LoadFloat(c * s.operand->stride(1));
          if (s.algorithm == dnnl::algorithm::binary_mul) k = v;
          if (s.algorithm == dnnl::algorithm::binary_add) add = v;
          if (s.algorithm == dnnl::algorithm::binary_sub) add = -v;
        }
        scale_[c] *= k;
        bias_[c] = bias_[c] * k + add;
      }
    }
    bias_shape_ = channels;
    bias_desc_ = {sizeof(MixrtTensorDesc),
                  nullptr,
                  bias_.data(),
                  MIXRT_DTYPE_F32,
                  1,
                  &bias_shape_,
                  &kUnitStride};
    folded_bias_ = TensorRef(bias_desc_);
  }

  // w * scale_ per output channel, in w's dtype.
  const TensorRef& FoldWeights() {
    const TensorRef& w = bound_.refs[1];
    const int64_t per_channel = w.numel() / w.dim(0);
    const size_t bytes =
        static_cast<size_t>(w.numel()) * (w.dtype() == MIXRT_DTYPE_F32 ? 4 : 2);
    folded_data_.resize(bytes);
    folded_desc_ = *w.desc();
    folded_desc_.data = folded_data_.data();
    folded_w_ = TensorRef(folded_desc_);
    for (int64_t o = 0; o < w.dim(0); ++o) {
      for (int64_t i = o * per_channel; i < (o + 1) * per_channel; ++i) {
        folded_w_.StoreFloat(i, w.LoadFloat(i) * scale_[o]);
      }
    }
    return folded_w_;
  }

  static constexpr int64_t kUnitStride = 1;
  const FusionGraph graph_;
  const ConvChain chain_;
  const size_t nodes_;
  const int relu_;       // The guarded relu's step in this group, or -1.
  const size_t affine_;  // Leading steps folded into weights and bias.
  const bool pool_;      // The group ends with the chain's max pool.
  const std::string description_;
  Bound bound_;  // Reused by each run (runs never overlap).
  WeightPackState pack_;
  dnnl::memory packed_;
  size_t packed_steps_ = 0;  // The post-ops the packed layout was chosen with.
  std::vector<float> packed_scale_;  // The scale folded into the packed copy.
  std::vector<float> scale_, bias_;
  int64_t bias_shape_ = 0;
  MixrtTensorDesc bias_desc_{}, folded_desc_{};
  TensorRef folded_bias_{bias_desc_}, folded_w_{folded_desc_};
  std::vector<uint8_t> folded_data_;
  std::optional<uint64_t> weight_version_;  // The one last told, if any.
  std::optional<uint64_t>
      magnitude_for_;  // The version weight_magnitude_ is of.
  double weight_magnitude_ = 0;
  dnnl::memory between_;                // The blocked result the pool reads.
  std::vector<uint8_t> unpooled_data_;  // RunAsWritten's, before its pool.
};

absl::StatusOr<std::unique_ptr<sdk::FusedKernel>> MakeFusedConv(
    const FusionGraph& g, EpilogueGroup<ConvChain> begun) {
  const size_t length = begun.nodes.size();
  ConvChain& c = begun.chain;
  const std::string& implementation = begun.implementation;
  const size_t steps = c.steps_upto[length - 1];
  const size_t folded = FoldedSteps(g, c, length);
  std::vector<std::string> names[2];  // Folded, then post-ops.
  for (size_t i = 0; i < steps; ++i)
    names[i < folded ? 0 : 1].push_back(c.steps[i].name);
  const MixrtDtype out = g.values[c.outs[length - 1]].dtype;
  const std::string description = absl::StrCat(
      "oneDNN conv2d", c.weight >= 0 ? " (weights packed per version)" : "",
      folded > 0 ? absl::StrCat(" + ", absl::StrJoin(names[0], ", "),
                                " folded into weights and bias")
                 : "",
      names[1].empty() ? "" : " + post-ops ", absl::StrJoin(names[1], ", "),
      HasPool(c, length) ? " + max pool on its blocked result" : "", " -> ",
      DtypeName(out), " (", implementation, ")");
  return std::make_unique<FusedConv>(g, std::move(c), length, description);
}

const EpilogueSkeleton<ConvChain> kConvSkeleton = {
    MIXRT_OP_CONV2D, "conv",         "convolution", FollowChain,
    FusablePrefix,   Implementation, MakeFusedConv};

}  // namespace

const EpiloguePattern kConvEpilogues = EpiloguePatternOf<kConvSkeleton>();

}  // namespace mixrt::cpu
