#include "chain_fusion.h"

#include <algorithm>
#include <string>

#include "mixrt/op_names.h"
#include "mixrt/sdk/plugin.h"
#include "mixrt/sdk/strings.h"

namespace partial {
namespace {

using mixrt::sdk::FusionGraph;
using mixrt::sdk::FusionNode;
using mixrt::sdk::FusionValue;

// A value the chain reads or writes at element i as data[i]: f32, dense,
// static, not a view. (A view's address is the viewed value's plus its
// offset; this plugin simply leaves views to the host.)
bool Plain(const FusionValue& v) {
  return v.dtype == MIXRT_DTYPE_F32 && v.is_static() && v.is_contiguous() &&
         v.view_of < 0;
}

// A row broadcast, read at element i as data[i % n]: a bias [n] added to
// [m, n], which the host passes as a view of the bias, shaped [m, n] with
// stride 0 over the rows. Its address (value_data) is its element 0's.
bool RowOf(const FusionValue& v, const FusionValue& out) {
  if (v.dtype != MIXRT_DTYPE_F32 || !v.is_static() || out.shape.empty() ||
      v.shape != out.shape || v.strides.back() != 1) {
    return false;
  }
  for (size_t d = 0; d + 1 < v.strides.size(); ++d) {
    if (v.strides[d] != 0) return false;
  }
  return true;
}

// add, mul or relu on f32 values of one element count (a row broadcast
// allowed as the second operand).
bool IsChainStep(const FusionGraph& g, const FusionNode& n) {
  if (n.outputs.size() != 1) return false;
  const FusionValue& out = g.values[n.outputs[0]];
  if (!Plain(out)) return false;
  auto attrs = n.GetAttrs<MixrtPointwiseAttrs>();
  if (!attrs.ok()) return false;
  if (n.op == MIXRT_OP_UNARY) {
    return attrs->kind == MIXRT_UNARY_RELU && n.inputs.size() == 1 &&
           Plain(g.values[n.inputs[0]]) &&
           g.values[n.inputs[0]].numel() == out.numel();
  }
  if (n.op != MIXRT_OP_BINARY || n.inputs.size() != 2 ||
      (attrs->kind != MIXRT_BINARY_ADD && attrs->kind != MIXRT_BINARY_MUL)) {
    return false;
  }
  const FusionValue& a = g.values[n.inputs[0]];
  const FusionValue& b = g.values[n.inputs[1]];
  return Plain(a) && a.numel() == out.numel() &&
         ((Plain(b) && b.numel() == out.numel()) || RowOf(b, out));
}

// A 2-D f32 matmul (with or without a bias), without activation or
// accumulation: the head of a chain, its epilogue the steps after it.
bool IsChainHead(const FusionGraph& g, const FusionNode& n) {
  if (n.op != MIXRT_OP_MATMUL ||
      (n.inputs.size() != 2 && n.inputs.size() != 3) || n.outputs.size() != 1) {
    return false;
  }
  // A bias [n] (Linear's): dense, as the unfused kernel reads it.
  if (n.inputs.size() == 3 && (!Plain(g.values[n.inputs[2]]) ||
                               g.values[n.inputs[2]].shape.size() != 1)) {
    return false;
  }
  auto attrs = n.GetAttrs<MixrtMatmulAttrs>();
  if (!attrs.ok() || attrs->activation != MIXRT_ACTIVATION_NONE ||
      attrs->beta != 0.0f) {
    return false;
  }
  for (int v : {n.inputs[0], n.inputs[1], n.outputs[0]}) {
    if (!Plain(g.values[v]) || g.values[v].shape.size() != 2) return false;
  }
  return true;
}

// One step of the chain: out = a op b (b < 0 for relu), on value indexes.
struct Step {
  bool relu = false, add = false;
  int a = -1, b = -1, out = -1;
  bool b_is_row = false;
  bool stored = false;  // OUTPUT or read outside the group.
};

class ChainKernel : public mixrt::sdk::FusedKernel {
 public:
  ChainKernel(const FusionGraph& g, mixrt::sdk::Span<const int> group_of_node,
              int group)
      : stores_(g.GroupStores(group_of_node, group)),
        written_(g.values.size(), false),
        registers_(g.values.size(), 0.0f) {
    for (int i : FusionGraph::GroupNodes(group_of_node, group)) {
      const FusionNode& n = g.nodes[i];
      if (n.op == MIXRT_OP_MATMUL) {
        matmul_out_ = n.outputs[0];
        a_ = n.inputs[0];
        w_ = n.inputs[1];
        bias_ = n.inputs.size() > 2 ? n.inputs[2] : -1;
        m_ = g.values[a_].shape[0];
        k_ = g.values[a_].shape[1];
        n_ = g.values[w_].shape[1];
        continue;
      }
      Step s;
      s.relu = n.op == MIXRT_OP_UNARY;
      s.add = !s.relu &&
              n.GetAttrs<MixrtPointwiseAttrs>()->kind == MIXRT_BINARY_ADD;
      s.a = n.inputs[0];
      s.out = n.outputs[0];
      if (!s.relu) {
        s.b = n.inputs[1];
        s.b_is_row = !Plain(g.values[s.b]);
        row_ = g.values[s.out].shape.back();
      }
      numel_ = g.values[s.out].numel();
      steps_.push_back(s);
    }
    // Fixed by the group: which values its own nodes write (read from
    // registers, not memory), and whether each step stores its result.
    if (matmul_out_ >= 0) written_[matmul_out_] = true;
    for (Step& s : steps_) {
      written_[s.out] = true;
      s.stored = IsStored(s.out);
    }
  }

  mixrt::sdk::Status Run(mixrt::sdk::Span<void* const> data,
                         mixrt::sdk::Span<const int64_t>) override {
    // The matmul's result: in memory when the graph needs it stored, else
    // in the scratch memory the host handed over (ScratchBytes: the host
    // gives no value memory to what only the group reads).
    const float* product = nullptr;
    if (matmul_out_ >= 0) {
      float* out = IsStored(matmul_out_)
                       ? static_cast<float*>(data[matmul_out_])
                       : static_cast<float*>(scratch());
      const float* a = static_cast<const float*>(data[a_]);
      const float* w = static_cast<const float*>(data[w_]);
      const float* bias =
          bias_ >= 0 ? static_cast<const float*>(data[bias_]) : nullptr;
      for (int64_t i = 0; i < m_; ++i) {  // As the unfused kernel sums.
        float* row = out + i * n_;
        for (int64_t j = 0; j < n_; ++j) {
          row[j] = 0.0f + (bias != nullptr ? bias[j] : 0.0f);  // As unfused.
        }
        for (int64_t p = 0; p < k_; ++p) {
          const float s = a[i * k_ + p];
          for (int64_t j = 0; j < n_; ++j) row[j] += s * w[p * n_ + j];
        }
      }
      product = out;
    }
    for (int64_t i = 0; i < numel_; ++i) {
      for (const Step& s : steps_) {
        const float x = Read(data, product, s.a, i, false);
        float y;
        if (s.relu) {
          y = x > 0.0f || x != x ? x : 0.0f;  // NaN stays NaN.
        } else {
          const float b = Read(data, product, s.b, i, s.b_is_row);
          y = s.add ? x + b : x * b;
        }
        registers_[s.out] = y;
        if (s.stored) static_cast<float*>(data[s.out])[i] = y;
      }
    }
    return mixrt::sdk::OkStatus();
  }

  // ABI 1.2: the unstored product's bytes, allocated by the host (its
  // memory statistics count them) and handed over before the first run.
  uint64_t ScratchBytes() const override {
    return matmul_out_ >= 0 && !IsStored(matmul_out_)
               ? static_cast<uint64_t>(m_ * n_) * sizeof(float)
               : 0;
  }

  std::string Description() const override {
    std::string chain = matmul_out_ >= 0 ? "matmul" : "";
    for (const Step& s : steps_) {
      mixrt::sdk::StrAppend(&chain, chain.empty() ? "" : " + ",
                            s.relu  ? "relu"
                            : s.add ? "add"
                                    : "mul");
    }
    return mixrt::sdk::StrCat("partial chain: ", chain, " (", numel_,
                              " elements, one pass)");
  }

 private:
  bool IsStored(int v) const {
    return std::find(stores_.begin(), stores_.end(), v) != stores_.end();
  }
  // A value at element i: the matmul's product, a register when a step of
  // the group writes it (steps run in order, so at element i it already
  // has), else the group's input in memory.
  float Read(mixrt::sdk::Span<void* const> data, const float* product, int v,
             int64_t i, bool row) const {
    if (v == matmul_out_) return product[i];
    if (written_[v]) return registers_[v];
    const float* p = static_cast<const float*>(data[v]);
    return row ? p[i % row_] : p[i];
  }

  std::vector<int> stores_;
  std::vector<Step> steps_;
  std::vector<bool> written_;
  std::vector<float> registers_;
  int matmul_out_ = -1, a_ = -1, w_ = -1, bias_ = -1;
  int64_t m_ = 0, k_ = 0, n_ = 0, numel_ = 0, row_ = 1;
};

}  // namespace

std::vector<int> ClaimChains(const FusionGraph& g) {
  std::vector<int> group(g.nodes.size(), -1);
  std::vector<int> members;  // Per group.
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const FusionNode& n = g.nodes[i];
    if (!IsChainStep(g, n)) continue;
    // Join the chain that wrote the first operand, if it is one of ours
    // and has this step's element count; a matmul writing it becomes the
    // chain's head; else a chain starts here.
    const int producer = g.producer[n.inputs[0]];
    int joined = -1;
    if (producer >= 0 && group[producer] >= 0) {
      joined = group[producer];
    } else if (producer >= 0 && IsChainHead(g, g.nodes[producer])) {
      joined = static_cast<int>(members.size());
      members.push_back(1);
      group[producer] = joined;
    }
    if (joined < 0) {
      joined = static_cast<int>(members.size());
      members.push_back(0);
    }
    group[i] = joined;
    ++members[joined];
  }
  // A chain of one op gains nothing: the host launches it. Renumber the
  // rest without gaps, as the ABI asks.
  std::vector<int> renumbered(members.size(), -1);
  int next = 0;
  for (size_t k = 0; k < members.size(); ++k) {
    if (members[k] >= 2) renumbered[k] = next++;
  }
  for (int& k : group) {
    if (k >= 0) k = renumbered[k];
  }
  return group;
}

mixrt::sdk::StatusOr<std::unique_ptr<mixrt::sdk::FusedKernel>> CompileChain(
    const FusionGraph& graph, mixrt::sdk::Span<const int> group_of_node,
    int group) {
  return std::make_unique<ChainKernel>(graph, group_of_node, group);
}

}  // namespace partial
