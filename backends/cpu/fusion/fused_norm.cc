#include "backends/cpu/fusion/fused_norm.h"

#include <optional>
#include <utility>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "backends/cpu/fusion/claim_in_order.h"
#include "backends/cpu/kernels/dense_call.h"
#include "mixrt/status_macros.h"
#include "plugins/sdk/plugin.h"

namespace mixrt::cpu {
namespace {

using sdk::FusionGraph;
using sdk::FusionNode;
using sdk::FusionValue;

// The one node reading value v, through plain reshapes or not at all: -1
// when v is a result, has other readers, or is read through another view.
int OnlyReader(const FusionGraph& g, int v) {
  if (g.values[v].has(MIXRT_FUSION_VALUE_OUTPUT) || g.readers[v].size() != 1)
    return -1;
  const int r = g.readers[v][0];
  for (int in : g.nodes[r].inputs) {
    if (in != v && g.values[in].view_of == v && g.ReshapeBase(in) != v)
      return -1;
  }
  return r;
}

bool Dense(const FusionValue& v, int64_t numel) {
  return v.is_static() && v.is_contiguous() && v.numel() == numel;
}

bool IsOneToOne(const FusionNode& n, MixrtOp op) {
  return n.op == op && !n.attrs_extended &&
         n.inputs.size() == (op == MIXRT_OP_BINARY ? 2u : 1u) &&
         n.outputs.size() == 1;
}

// The copy that is value v's only reader (so it reads v or a plain
// reshape of it), writing dense floating-point memory of `numel`
// elements, or -1: a result's cast a group can write in its place.
int CastOf(const FusionGraph& g, int v, int64_t numel) {
  const int c = OnlyReader(g, v);
  if (c < 0 || !IsOneToOne(g.nodes[c], MIXRT_OP_COPY)) return -1;
  const FusionValue& out = g.values[g.nodes[c].outputs[0]];
  return Dense(out, numel) && sdk::IsFloatingDtype(out.dtype) ? c : -1;
}

// The cast node reading layer_norm node `i`'s normalized result as the
// same contiguous memory, or -1.
int NormCastOf(const FusionGraph& g, int i) {
  const FusionNode& n = g.nodes[i];
  if (n.op != MIXRT_OP_LAYER_NORM ||
      (n.inputs.size() != 1 && n.inputs.size() != 3) || n.outputs.size() != 3 ||
      n.attrs_extended) {
    return -1;
  }
  const FusionValue& x = g.values[n.inputs[0]];
  const FusionValue& y = g.values[n.outputs[0]];
  if (x.shape.size() != 2 || !x.is_static() || !x.is_contiguous() ||
      !y.is_contiguous()) {
    return -1;
  }
  return CastOf(g, n.outputs[0], y.numel());
}

class NormCast : public sdk::FusedKernel {
 public:
  NormCast(FusionValue x, std::vector<FusionValue> affine,
           std::vector<int> values, float eps, MixrtDtype out_dtype)
      : x_(std::move(x)),
        affine_(std::move(affine)),
        values_(std::move(values)),
        eps_(eps),
        out_dtype_(out_dtype) {}

  // values_: x, [weight, bias,] mean, rstd, the cast's result.
  sdk::Status Run(sdk::Span<void* const> data,
                  sdk::Span<const int64_t>) override {
    const size_t k = affine_.size();
    const MixrtTensorDesc xd = x_.Desc(data[values_[0]]);
    std::vector<MixrtTensorDesc> ad;
    for (size_t i = 0; i < k; ++i)
      ad.push_back(affine_[i].Desc(data[values_[1 + i]]));
    std::vector<sdk::TensorRef> a(ad.begin(), ad.end());
    void* out = data[values_[3 + k]];
    if (out == nullptr)
      return absl::InvalidArgumentError("layer_norm + cast: no result address");
    LayerNormRows(sdk::TensorRef(xd), k == 2 ? &a[0] : nullptr,
                  k == 2 ? &a[1] : nullptr, eps_, out, out_dtype_,
                  static_cast<float*>(data[values_[1 + k]]),
                  static_cast<float*>(data[values_[2 + k]]));
    return absl::OkStatus();
  }

  std::string Description() const override {
    return absl::StrCat("layer_norm writing its cast (", DtypeName(out_dtype_),
                        ")");
  }

 private:
  const FusionValue x_;
  const std::vector<FusionValue> affine_;
  const std::vector<int> values_;
  const float eps_;
  const MixrtDtype out_dtype_;
};

// layer_norm_backward node `i` and the neighbours that can join it: the
// copy widening its gradient exactly (bf16 or f16 -> f32), the add of the
// residual branch's f32 gradient to its result, and the cast of that sum.
struct NormBackwardParts {
  int widen = -1, source = -1;  // The copy and the value it widens.
  int add = -1, residual = -1;  // The add and its other operand.
  int cast = -1;
  int out = -1;  // The value the group writes the gradient into.
};

std::optional<NormBackwardParts> NormBackwardOf(const FusionGraph& g, int i,
                                                absl::Span<const int> taken) {
  auto free = [&](int node) {
    return node >= 0 &&
           (static_cast<size_t>(node) >= taken.size() || taken[node] < 0);
  };
  const FusionNode& n = g.nodes[i];
  const bool affine = n.inputs.size() == 5;
  if (!free(i) || n.op != MIXRT_OP_LAYER_NORM_BACKWARD || n.attrs_extended ||
      (n.inputs.size() != 4 && !affine) ||
      n.outputs.size() != (affine ? 3u : 1u)) {
    return std::nullopt;
  }
  const FusionValue& x = g.values[n.inputs[1]];
  if (x.shape.size() != 2 || !Dense(x, x.numel())) return std::nullopt;
  const int64_t numel = x.numel();
  for (int k = 2; k < 4; ++k) {
    const FusionValue& stat = g.values[n.inputs[k]];
    if (stat.dtype != MIXRT_DTYPE_F32 || !Dense(stat, x.shape[0]))
      return std::nullopt;
  }
  if (affine && !Dense(g.values[n.inputs[4]], x.shape[1])) return std::nullopt;
  NormBackwardParts p;
  const int gy = n.inputs[0];
  const int widened = g.ReshapeBase(gy);
  const int c = g.producer[widened];
  if (Dense(g.values[gy], numel) && free(c) &&
      IsOneToOne(g.nodes[c], MIXRT_OP_COPY) && OnlyReader(g, widened) == i &&
      g.values[widened].dtype == MIXRT_DTYPE_F32) {
    const int src = g.nodes[c].inputs[0];
    const MixrtDtype d = g.values[src].dtype;
    if (Dense(g.values[src], numel) &&
        (d == MIXRT_DTYPE_BF16 || d == MIXRT_DTYPE_F16)) {
      p.widen = c;
      p.source = src;
    }
  }
  const int gx = n.outputs[0];
  p.out = gx;
  const int a = OnlyReader(g, gx);
  if (g.values[gx].dtype == MIXRT_DTYPE_F32 && free(a) &&
      IsOneToOne(g.nodes[a], MIXRT_OP_BINARY)) {
    const FusionNode& add = g.nodes[a];
    auto attrs = add.GetAttrs<MixrtPointwiseAttrs>();
    const bool first = g.ReshapeBase(add.inputs[0]) == gx;
    const int r = add.inputs[first ? 1 : 0];
    const int sum = add.outputs[0];
    if (attrs.ok() && attrs->kind == MIXRT_BINARY_ADD &&
        g.ReshapeBase(r) != gx &&
        g.ReshapeBase(add.inputs[first ? 0 : 1]) == gx &&
        g.values[r].dtype == MIXRT_DTYPE_F32 && Dense(g.values[r], numel) &&
        g.values[sum].dtype == MIXRT_DTYPE_F32 && Dense(g.values[sum], numel)) {
      p.add = a;
      p.residual = r;
      p.out = sum;
      const int cast = CastOf(g, sum, numel);
      if (free(cast)) {
        p.cast = cast;
        p.out = g.nodes[cast].outputs[0];
      }
    }
  }
  if (p.widen < 0 && p.add < 0) return std::nullopt;
  return p;
}

std::vector<int> PartNodes(const NormBackwardParts& p, int i) {
  std::vector<int> nodes;
  for (int k : {p.widen, i, p.add, p.cast}) {
    if (k >= 0) nodes.push_back(k);
  }
  return nodes;
}

class NormBackward : public sdk::FusedKernel {
 public:
  // values_: gy (or what the copy widens), x, mean, rstd, [weight,]
  // residual or -1, out, [grad_weight, grad_bias].
  NormBackward(std::vector<FusionValue> described, std::vector<int> values,
               bool affine, std::string parts)
      : described_(std::move(described)),
        values_(std::move(values)),
        affine_(affine),
        parts_(std::move(parts)) {}

  sdk::Status Run(sdk::Span<void* const> data,
                  sdk::Span<const int64_t>) override {
    auto at = [&](size_t k) {
      return values_[k] < 0 ? nullptr : data[values_[k]];
    };
    const size_t w = affine_ ? 1 : 0;
    // The gradient goes unstored when nothing reads it (the first block's
    // input needs none): only the parameters' gradients are computed.
    void* out = at(5 + w);
    if (at(0) == nullptr || at(1) == nullptr || (out == nullptr && !affine_)) {
      return absl::InvalidArgumentError(
          "layer_norm_backward fused: an address is missing");
    }
    const MixrtTensorDesc gd = described_[0].Desc(at(0)),
                          xd = described_[1].Desc(at(1));
    const sdk::TensorRef gy(gd), x(xd);
    std::optional<MixrtTensorDesc> wd;
    std::optional<sdk::TensorRef> weight;
    if (affine_) {
      wd = described_[4].Desc(at(4));
      weight.emplace(*wd);
    }
    LayerNormBackwardRows(
        gy, x, static_cast<const float*>(at(2)),
        static_cast<const float*>(at(3)), affine_ ? &*weight : nullptr, out,
        described_[5 + w].dtype, static_cast<const float*>(at(4 + w)),
        affine_ ? at(6 + w) : nullptr, affine_ ? at(7 + w) : nullptr,
        affine_ ? described_[6 + w].dtype : MIXRT_DTYPE_F32);
    return absl::OkStatus();
  }

  std::string Description() const override { return parts_; }

 private:
  const std::vector<FusionValue>
      described_;  // Per entry of values_ (-1: default).
  const std::vector<int> values_;
  const bool affine_;
  const std::string parts_;
};

}  // namespace

std::vector<int> ClaimNormCasts(const FusionGraph& g,
                                absl::Span<const int> taken, int first) {
  return ClaimInOrder(
      g.nodes.size(), taken, first, [&g](int i, absl::Span<const int> claimed) {
        const int c = claimed[i] >= 0 ? -1 : NormCastOf(g, i);
        return c < 0 || claimed[c] >= 0 ? std::vector<int>{}
                                        : std::vector<int>{i, c};
      });
}

absl::StatusOr<std::unique_ptr<sdk::FusedKernel>> CompileNormCast(
    const FusionGraph& g, absl::Span<const int> group_of_node, int group) {
  const std::vector<int> nodes = FusionGraph::GroupNodes(group_of_node, group);
  if (nodes.size() != 2 || NormCastOf(g, nodes[0]) != nodes[1]) {
    return absl::InvalidArgumentError(
        "layer_norm + cast: the group is not a layer_norm and its cast");
  }
  const FusionNode& n = g.nodes[nodes[0]];
  MIXRT_ASSIGN_OR_RETURN(MixrtNormAttrs attrs, n.GetAttrs<MixrtNormAttrs>());
  std::vector<FusionValue> affine;
  std::vector<int> values = {n.inputs[0]};
  for (size_t k = 1; k < n.inputs.size(); ++k) {
    affine.push_back(g.values[n.inputs[k]]);
    values.push_back(n.inputs[k]);
  }
  values.push_back(n.outputs[1]);
  values.push_back(n.outputs[2]);
  const int out = g.nodes[nodes[1]].outputs[0];
  values.push_back(out);
  return std::make_unique<NormCast>(
      g.values[n.inputs[0]], std::move(affine), std::move(values),
      static_cast<float>(attrs.eps), g.values[out].dtype);
}

std::vector<int> ClaimNormBackwards(const FusionGraph& g,
                                    absl::Span<const int> taken, int first) {
  return ClaimInOrder(g.nodes.size(), taken, first,
                      [&g](int i, absl::Span<const int> claimed) {
                        const std::optional<NormBackwardParts> p =
                            NormBackwardOf(g, i, claimed);
                        return p ? PartNodes(*p, i) : std::vector<int>{};
                      });
}

absl::StatusOr<std::unique_ptr<sdk::FusedKernel>> CompileNormBackward(
    const FusionGraph& g, absl::Span<const int> group_of_node, int group) {
  const std::vector<int> nodes = FusionGraph::GroupNodes(group_of_node, group);
  int i = -1;
  for (int k : nodes) {
    if (g.nodes[k].op == MIXRT_OP_LAYER_NORM_BACKWARD) i = k;
  }
  const std::optional<NormBackwardParts> p =
      i < 0 ? std::nullopt : NormBackwardOf(g, i, {});
  if (!p || PartNodes(*p, i) != nodes) {
    return absl::InvalidArgumentError(
        "layer_norm_backward fused: the group is not a layer_norm_backward and "
        "its neighbours");
  }
  const FusionNode& n = g.nodes[i];
  const bool affine = n.inputs.size() == 5;
  std::vector<int> values = {p->widen >= 0 ? p->source : n.inputs[0],
                             n.inputs[1], n.inputs[2], n.inputs[3]};
  if (affine) values.push_back(n.inputs[4]);
  values.push_back(p->residual);
  values.push_back(p->out);
  if (affine) {
    values.push_back(n.outputs[1]);
    values.push_back(n.outputs[2]);
  }
  std::vector<FusionValue> described;
  for (int v : values) described.push_back(v < 0 ? FusionValue{} : g.values[v]);
  std::string parts = "layer_norm_backward";
  if (p->widen >= 0) {
    absl::StrAppend(&parts, " reading its gradient as ",
                    DtypeName(g.values[p->source].dtype));
  }
  if (p->add >= 0) {
    absl::StrAppend(&parts, p->widen >= 0 ? "," : "",
                    " adding the residual gradient");
  }
  if (p->cast >= 0) {
    absl::StrAppend(&parts, " and writing its cast (",
                    DtypeName(g.values[p->out].dtype), ")");
  }
  return std::make_unique<NormBackward>(std::move(described), std::move(values),
                                        affine, std::move(parts));
}

}  // namespace mixrt::cpu
