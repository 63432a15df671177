#include "backends/cpu/fusion/fused_attention.h"

#include <array>
#include <optional>
#include <utility>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "backends/cpu/kernels/attention_rows.h"
#include "mixrt/status_macros.h"
#include "plugins/sdk/plugin.h"
#include "plugins/sdk/tensor_ref.h"

namespace mixrt::cpu {
namespace {

using sdk::FusionGraph;
using sdk::FusionNode;
using sdk::FusionValue;

// How an attention operand [G, R, C] is read: straight from `value` (the
// operand itself, dense), or from the source of the copy node `copy` that
// made it, through the source's strides (`rows`, its data set per run).
struct OperandSource {
  int value = -1;
  int copy = -1;
  GroupRows rows;
};

// The attention operand `x` (node input) as the copy making it would read
// it: the copy's result must be x's memory in order (x itself or a plain
// reshape of it), read by this attention only, not a result of the graph;
// the copy a same-dtype copy of a static view [G, R, C] or [B, H, R, C]
// (B * H = G) whose rows are contiguous. nullopt when x is none of that.
std::optional<OperandSource> ThroughCopy(const FusionGraph& g, int attention,
                                         int x, absl::Span<const int> taken) {
  const int made = g.ReshapeBase(x);
  const int c = g.producer[made];
  if (c < 0 || (static_cast<size_t>(c) < taken.size() && taken[c] >= 0))
    return std::nullopt;
  const FusionNode& copy = g.nodes[c];
  if (copy.op != MIXRT_OP_COPY || copy.inputs.size() != 1 ||
      copy.outputs.size() != 1 ||
      g.values[made].has(MIXRT_FUSION_VALUE_OUTPUT) ||
      g.readers[made].size() != 1 || g.readers[made][0] != attention) {
    return std::nullopt;
  }
  const FusionValue& src = g.values[copy.inputs[0]];
  const FusionValue& dst = g.values[made];
  const FusionValue& op = g.values[x];
  const size_t n = src.shape.size();
  if (src.dtype != dst.dtype || !src.is_static() || !dst.is_static() ||
      !dst.is_contiguous() || src.shape != dst.shape || (n != 3 && n != 4) ||
      src.strides[n - 1] != 1 || op.shape.size() != 3 ||
      src.shape[n - 1] != op.shape[2] || src.shape[n - 2] != op.shape[1] ||
      (n == 3 ? src.shape[0] : src.shape[0] * src.shape[1]) != op.shape[0]) {
    return std::nullopt;
  }
  OperandSource s;
  s.value = copy.inputs[0];
  s.copy = c;
  s.rows.dtype = src.dtype;
  s.rows.row_stride = src.strides[n - 2];
  s.rows.batch_stride = src.strides[0];
  if (n == 4) {
    s.rows.heads = src.shape[1];
    s.rows.head_stride = src.strides[1];
  }
  return s;
}

// Where the attention node's result [G, R, C] goes when a copy merging
// its heads is its only reader (a multi-head attention's [B, H, R, C] ->
// [B, R, H, C] before the output projection): that copy's dense result,
// written row by row through its strides. The copy reads the result
// through a view [B, R, H, C] (B * H = G) with no offset; nullopt when it
// is not that copy or the result is needed elsewhere.
std::optional<OperandSource> MergeCopy(const FusionGraph& g, int attention,
                                       absl::Span<const int> taken) {
  const int o = g.nodes[attention].outputs[0];
  const FusionValue& out = g.values[o];
  if (out.has(MIXRT_FUSION_VALUE_OUTPUT) || g.readers[o].size() != 1 ||
      out.shape.size() != 3 || !out.is_static() || !out.is_contiguous()) {
    return std::nullopt;
  }
  const int c = g.readers[o][0];
  if (static_cast<size_t>(c) < taken.size() && taken[c] >= 0)
    return std::nullopt;
  const FusionNode& copy = g.nodes[c];
  if (copy.op != MIXRT_OP_COPY || copy.inputs.size() != 1 ||
      copy.outputs.size() != 1) {
    return std::nullopt;
  }
  const FusionValue& view = g.values[copy.inputs[0]];
  const FusionValue& dst = g.values[copy.outputs[0]];
  const int64_t rows = out.shape[1], cols = out.shape[2];
  if (view.view_of != o || view.view_offset != 0 || view.dtype != out.dtype ||
      dst.dtype != out.dtype || !view.is_static() || !dst.is_static() ||
      !dst.is_contiguous() || view.shape.size() != 4 ||
      dst.shape != view.shape || view.shape[1] != rows ||
      view.shape[3] != cols || view.shape[0] * view.shape[2] != out.shape[0]) {
    return std::nullopt;
  }
  const int64_t heads = view.shape[2];
  // The strides of [B, H, R, C] read as [B, R, H, C]; a dim of one
  // element may have any.
  const int64_t merged[4] = {heads * rows * cols, cols, rows * cols, 1};
  for (int d = 0; d < 4; ++d) {
    if (view.shape[d] != 1 && view.strides[d] != merged[d]) return std::nullopt;
  }
  OperandSource s;
  s.value = copy.outputs[0];
  s.copy = c;
  s.rows.dtype = out.dtype;
  s.rows.heads = heads;
  s.rows.batch_stride = rows * heads * cols;
  s.rows.head_stride = cols;
  s.rows.row_stride = heads * cols;
  return s;
}

// The attention node i's operand sources (q, k, v), or nullopt when it
// cannot be fused or no copy would be taken.
std::optional<std::array<OperandSource, 3>> Sources(
    const FusionGraph& g, int i, absl::Span<const int> taken) {
  const FusionNode& n = g.nodes[i];
  if (n.op != MIXRT_OP_SCALED_DOT_PRODUCT_ATTENTION || n.attrs_extended ||
      n.inputs.size() < 3 || n.outputs.size() != 2) {
    return std::nullopt;
  }
  absl::StatusOr<MixrtAttentionAttrs> attrs = n.GetAttrs<MixrtAttentionAttrs>();
  // Dropout's stream position may move between runs; the op keeps it.
  if (!attrs.ok() || attrs->dropout_p != 0) return std::nullopt;
  std::array<OperandSource, 3> sources;
  bool any_copy = false;
  for (int k = 0; k < 3; ++k) {
    const int x = n.inputs[k];
    std::optional<OperandSource> s = ThroughCopy(g, i, x, taken);
    for (int j = 0; s.has_value() && j < k; ++j) {
      if (sources[j].copy == s->copy) s->copy = -1;  // One copy read twice.
    }
    if (s.has_value()) {
      sources[k] = *s;
      any_copy = true;
      continue;
    }
    const FusionValue& v = g.values[x];
    if (v.shape.size() != 3 || !v.is_static() || !v.is_contiguous())
      return std::nullopt;
    sources[k].value = x;
    sources[k].rows =
        GroupRows::Dense(nullptr, v.dtype, v.shape[1], v.shape[2]);
  }
  if (!any_copy && !MergeCopy(g, i, taken).has_value()) return std::nullopt;
  for (int v : n.outputs) {
    if (!g.values[v].is_static() || !g.values[v].is_contiguous())
      return std::nullopt;
  }
  return sources;
}

class AttentionHeads : public sdk::FusedKernel {
 public:
  AttentionHeads(MixrtAttentionAttrs attrs,
                 std::array<OperandSource, 3> sources,
                 std::optional<OperandSource> merge,
                 std::optional<FusionValue> mask, int mask_value,
                 MixrtDtype dtype, int out, int lse, int64_t groups,
                 int64_t queries, int64_t keys, int64_t head_dim,
                 int64_t value_dim)
      : attrs_(attrs),
        sources_(sources),
        merge_(merge),
        mask_(std::move(mask)),
        mask_value_(mask_value),
        dtype_(dtype),
        out_(out),
        lse_(lse) {
    call_.attrs = &attrs_;
    call_.groups = groups;
    call_.queries = queries;
    call_.keys = keys;
    call_.head_dim = head_dim;
    call_.value_dim = value_dim;
  }

  sdk::Status Run(sdk::Span<void* const> data,
                  sdk::Span<const int64_t>) override {
    AttentionForwardRows rows;
    GroupRows* operands[3] = {&rows.q, &rows.k, &rows.v};
    for (int k = 0; k < 3; ++k) {
      *operands[k] = sources_[k].rows;
      operands[k]->data = data[sources_[k].value];
      if (operands[k]->data == nullptr) {
        return absl::InvalidArgumentError(
            "attention reading its heads: no operand address");
      }
    }
    if (merge_.has_value()) {
      rows.out = merge_->rows;
      rows.out.data = data[merge_->value];
    } else {
      rows.out =
          GroupRows::Dense(data[out_], dtype_, call_.queries, call_.value_dim);
    }
    if (rows.out.data == nullptr) {
      return absl::InvalidArgumentError(
          "attention reading its heads: no result address");
    }
    // The normalizers are this group's own when nothing else reads them.
    lse_scratch_.resize(data[lse_] == nullptr ? call_.groups * call_.queries
                                              : 0);
    rows.lse = data[lse_] != nullptr ? static_cast<float*>(data[lse_])
                                     : lse_scratch_.data();
    sdk::AttentionCall call = call_;
    MixrtTensorDesc mask_desc{};
    std::optional<sdk::TensorRef> mask;
    if (mask_.has_value()) {
      mask_desc = mask_->Desc(data[mask_value_]);
      mask.emplace(mask_desc);
      call.mask = &*mask;
    }
    return RunAttentionForward(call, rows);
  }

  std::string Description() const override {
    int copies = 0;
    for (const OperandSource& s : sources_) copies += s.copy >= 0 ? 1 : 0;
    if (merge_.has_value()) ++copies;
    return absl::StrCat("attention reading ",
                        merge_.has_value() ? "and writing " : "",
                        "its heads in place (", copies,
                        copies == 1 ? " copy" : " copies", " fused)");
  }

 private:
  MixrtAttentionAttrs attrs_;
  const std::array<OperandSource, 3> sources_;
  // The copy merging the heads of the result, which the kernel writes.
  const std::optional<OperandSource> merge_;
  const std::optional<FusionValue> mask_;
  const int mask_value_;
  const MixrtDtype dtype_;
  const int out_, lse_;
  sdk::AttentionCall call_;
  std::vector<float> lse_scratch_;
};

}  // namespace

std::vector<int> ClaimAttentionHeads(const FusionGraph& g,
                                     absl::Span<const int> taken, int first) {
  std::vector<int> group(g.nodes.size(), -1);
  int next = first;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    if (i < taken.size() && taken[i] >= 0) continue;
    const auto sources = Sources(g, static_cast<int>(i), taken);
    if (!sources.has_value()) continue;
    group[i] = next;
    for (const OperandSource& s : *sources) {
      if (s.copy >= 0) group[s.copy] = next;
    }
    const auto merge = MergeCopy(g, static_cast<int>(i), taken);
    if (merge.has_value()) group[merge->copy] = next;
    ++next;
  }
  return group;
}

absl::StatusOr<std::unique_ptr<sdk::FusedKernel>> CompileAttentionHeads(
    const FusionGraph& g, absl::Span<const int> group_of_node, int group) {
  const std::vector<int> nodes = FusionGraph::GroupNodes(group_of_node, group);
  int i = -1;
  for (int node : nodes) {
    if (g.nodes[node].op == MIXRT_OP_SCALED_DOT_PRODUCT_ATTENTION) i = node;
  }
  const auto sources = i < 0 ? std::nullopt : Sources(g, i, {});
  size_t copies = 0;
  for (int k = 0; sources.has_value() && k < 3; ++k) {
    const int c = (*sources)[k].copy;
    if (c >= 0 && group_of_node[c] == group) ++copies;
  }
  // The merge only when the host kept its copy in the group.
  std::optional<OperandSource> merge =
      i < 0 ? std::nullopt : MergeCopy(g, i, {});
  if (merge.has_value() && group_of_node[merge->copy] != group) merge.reset();
  if (merge.has_value()) ++copies;
  if (!sources.has_value() || copies + 1 != nodes.size()) {
    return absl::InvalidArgumentError(
        "attention reading its heads: the group is not an attention, the "
        "copies making "
        "its operands and the copy merging its result's heads");
  }
  const FusionNode& n = g.nodes[i];
  MIXRT_ASSIGN_OR_RETURN(const MixrtAttentionAttrs attrs,
                         n.GetAttrs<MixrtAttentionAttrs>());
  std::optional<FusionValue> mask;
  int mask_value = -1;
  if (attrs.mask_kind != MIXRT_ATTENTION_MASK_NONE) {
    if (n.inputs.size() != 4) {
      return absl::InvalidArgumentError(
          "attention reading its heads: the mask is missing");
    }
    mask_value = n.inputs[3];
    mask = g.values[mask_value];
  }
  const FusionValue& q = g.values[n.inputs[0]];
  const FusionValue& v = g.values[n.inputs[2]];
  const FusionValue& k = g.values[n.inputs[1]];
  return std::make_unique<AttentionHeads>(
      attrs, *sources, merge, std::move(mask), mask_value, q.dtype,
      n.outputs[0], n.outputs[1], q.shape[0], q.shape[1], k.shape[1],
      q.shape[2], v.shape[2]);
}

}  // namespace mixrt::cpu
