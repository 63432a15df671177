#include "backends/cpu/fused_norm.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "backends/cpu/dense_call.h"
#include "mixrt/status_macros.h"
#include "plugins/sdk/plugin.h"

namespace mixrt::cpu {
namespace {

using sdk::FusionGraph;
using sdk::FusionNode;
using sdk::FusionValue;

// The cast node reading layer_norm node `i`'s normalized result as the
// same contiguous memory, or -1.
int CastOf(const FusionGraph& g, int i) {
  const FusionNode& n = g.nodes[i];
  if (n.op != MIXRT_OP_LAYER_NORM || (n.inputs.size() != 1 && n.inputs.size() != 3) ||
      n.outputs.size() != 3 || n.attrs_extended) {
    return -1;
  }
  const FusionValue& x = g.values[n.inputs[0]];
  const int y = n.outputs[0];
  const FusionValue& yv = g.values[y];
  if (x.shape.size() != 2 || !x.is_static() || !x.is_contiguous() || !yv.is_contiguous() ||
      yv.has(MIXRT_FUSION_VALUE_OUTPUT) || g.readers[y].size() != 1) {
    return -1;
  }
  const int c = g.readers[y][0];
  const FusionNode& cast = g.nodes[c];
  if (cast.op != MIXRT_OP_COPY || cast.inputs.size() != 1 || cast.outputs.size() != 1) {
    return -1;
  }
  const int in = cast.inputs[0];
  const FusionValue& iv = g.values[in];
  const FusionValue& out = g.values[cast.outputs[0]];
  const bool same_memory = in == y || (iv.view_of == y && g.IsPlainReshape(in));
  if (!same_memory || !out.is_static() || !out.is_contiguous() ||
      out.numel() != yv.numel() || !sdk::IsFloatingDtype(out.dtype)) {
    return -1;
  }
  return c;
}

class NormCast : public sdk::FusedKernel {
 public:
  NormCast(FusionValue x, std::vector<FusionValue> affine, std::vector<int> values, float eps,
           MixrtDtype out_dtype)
      : x_(std::move(x)),
        affine_(std::move(affine)),
        values_(std::move(values)),
        eps_(eps),
        out_dtype_(out_dtype) {}

  // values_: x, [weight, bias,] mean, rstd, the cast's result.
  absl::Status Run(absl::Span<void* const> data, absl::Span<const int64_t>) override {
    const size_t k = affine_.size();
    const MixrtTensorDesc xd = x_.Desc(data[values_[0]]);
    std::vector<MixrtTensorDesc> ad;
    for (size_t i = 0; i < k; ++i) ad.push_back(affine_[i].Desc(data[values_[1 + i]]));
    std::vector<sdk::TensorRef> a(ad.begin(), ad.end());
    void* out = data[values_[3 + k]];
    if (out == nullptr) return absl::InvalidArgumentError("layer_norm + cast: no result address");
    LayerNormRows(sdk::TensorRef(xd), k == 2 ? &a[0] : nullptr, k == 2 ? &a[1] : nullptr, eps_,
                  out, out_dtype_, static_cast<float*>(data[values_[1 + k]]),
                  static_cast<float*>(data[values_[2 + k]]));
    return absl::OkStatus();
  }

  std::string Description() const override {
    return absl::StrCat("layer_norm writing its cast (", DtypeName(out_dtype_), ")");
  }

 private:
  const FusionValue x_;
  const std::vector<FusionValue> affine_;
  const std::vector<int> values_;
  const float eps_;
  const MixrtDtype out_dtype_;
};

}  // namespace

std::vector<int> ClaimNormCasts(const FusionGraph& g, absl::Span<const int> taken, int first) {
  std::vector<int> group(g.nodes.size(), -1);
  int next = first;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    if (i < taken.size() && taken[i] >= 0) continue;
    const int c = CastOf(g, static_cast<int>(i));
    if (c < 0 || (static_cast<size_t>(c) < taken.size() && taken[c] >= 0)) continue;
    group[i] = group[c] = next++;
  }
  return group;
}

absl::StatusOr<std::unique_ptr<sdk::FusedKernel>> CompileNormCast(
    const FusionGraph& g, absl::Span<const int> group_of_node, int group) {
  const std::vector<int> nodes = FusionGraph::GroupNodes(group_of_node, group);
  if (nodes.size() != 2 || CastOf(g, nodes[0]) != nodes[1]) {
    return absl::InvalidArgumentError("layer_norm + cast: the group is not a layer_norm and its cast");
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
  return std::make_unique<NormCast>(g.values[n.inputs[0]], std::move(affine), std::move(values),
                                    static_cast<float>(attrs.eps), g.values[out].dtype);
}

}  // namespace mixrt::cpu
