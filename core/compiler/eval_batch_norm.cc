#include "core/compiler/eval_batch_norm.h"

#include <cstring>
#include <utility>
#include <vector>

namespace mixrt::compiler {
namespace {

std::vector<uint8_t> Pointwise(uint32_t kind, double alpha = 0,
                               double beta = 0) {
  MixrtPointwiseAttrs a{};
  a.struct_size = sizeof(a);
  a.kind = kind;
  a.alpha = alpha;
  a.beta = beta;
  std::vector<uint8_t> bytes(sizeof(a));
  std::memcpy(bytes.data(), &a, sizeof(a));
  return bytes;
}

// Whether any node other than `self` reads a view of `slot`, or the graph
// returns one.
bool ReadElsewhere(const Graph& g, int slot, int self) {
  for (const ValueRef& v : g.outputs) {
    if (v.slot == slot) return true;
  }
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    if (static_cast<int>(i) == self) continue;
    for (const ValueRef& v : g.nodes[i].inputs) {
      if (v.slot == slot) return true;
    }
  }
  return false;
}

class Rewriter {
 public:
  explicit Rewriter(Graph* g) : g_(g) {}

  // A fresh f32 [C] (or x-shaped) intermediate.
  ValueRef Fresh(const Shape& shape, DType dtype) {
    StorageSlot s;
    s.kind = StorageSlot::Kind::kInternal;
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    s.bytes = static_cast<uint64_t>(n) * DTypeSize(dtype);
    g_->slots.push_back(std::move(s));
    ValueRef v;
    v.slot = static_cast<int>(g_->slots.size()) - 1;
    v.dtype = dtype;
    v.shape = shape;
    v.strides = ContiguousStrides(shape);
    return v;
  }

  void Add(std::vector<GraphNode>* out, MixrtOp op, std::vector<uint8_t> attrs,
           std::vector<ValueRef> inputs, ValueRef output) {
    GraphNode n;
    n.op = op;
    n.attrs = std::move(attrs);
    n.inputs = std::move(inputs);
    n.outputs = {std::move(output)};
    out->push_back(std::move(n));
  }

 private:
  Graph* g_;
};

}  // namespace

int LowerEvalBatchNorms(Graph* g) {
  int lowered = 0;
  std::vector<GraphNode> nodes;
  nodes.reserve(g->nodes.size());
  Rewriter r(g);
  for (size_t i = 0; i < g->nodes.size(); ++i) {
    const GraphNode& n = g->nodes[i];
    MixrtBatchNormAttrs a{};
    const bool candidate = n.kind == GraphNode::Kind::kLaunch &&
                           n.op == MIXRT_OP_BATCH_NORM &&
                           n.attrs.size() >= sizeof(a) &&
                           n.inputs.size() == 3 && n.outputs.size() == 5;
    if (candidate) std::memcpy(&a, n.attrs.data(), sizeof(a));
    bool ok = candidate && a.training == 0;
    if (ok) {
      const ValueRef& x = n.inputs[0];
      const ValueRef &w = n.inputs[1], &b = n.inputs[2];
      const ValueRef &mean = n.outputs[3], &var = n.outputs[4];
      const int64_t c = x.shape.size() >= 2 ? x.shape[1] : -1;
      for (const ValueRef* p : {&w, &b, &mean, &var}) {
        ok = ok && p->shape.size() == 1 && p->shape[0] == c && IsDense(*p) &&
             IsFloating(p->dtype);
      }
      // The statistics are the graph's constants, read by nothing else
      // (eval writes them unchanged); save_mean/save_invstd unread.
      ok = ok && g->slots[mean.slot].kind == StorageSlot::Kind::kConstant &&
           g->slots[var.slot].kind == StorageSlot::Kind::kConstant &&
           mean.dtype == DType::kF32 && var.dtype == DType::kF32 &&
           !ReadElsewhere(*g, mean.slot, static_cast<int>(i)) &&
           !ReadElsewhere(*g, var.slot, static_cast<int>(i)) &&
           !ReadElsewhere(*g, n.outputs[1].slot, static_cast<int>(i)) &&
           !ReadElsewhere(*g, n.outputs[2].slot, static_cast<int>(i)) &&
           IsFloating(x.dtype) && n.outputs[0].shape == x.shape;
    }
    if (!ok) {
      nodes.push_back(n);
      continue;
    }
    const ValueRef x = n.inputs[0], w = n.inputs[1], b = n.inputs[2];
    const ValueRef mean = n.outputs[3], var = n.outputs[4], y = n.outputs[0];
    const Shape channels = {x.shape[1]};
    auto f32 = [&](ValueRef v) {  // v as f32: itself, or a cast.
      if (v.dtype == DType::kF32) return v;
      ValueRef c = r.Fresh(v.shape, DType::kF32);
      r.Add(&nodes, MIXRT_OP_COPY, {}, {v}, c);
      return c;
    };
    // Per channel, on constants alone (kept between runs).
    const ValueRef var_eps = r.Fresh(channels, DType::kF32);
    r.Add(&nodes, MIXRT_OP_UNARY, Pointwise(MIXRT_UNARY_SCALE, 1.0, a.eps),
          {var}, var_eps);
    const ValueRef inv_std = r.Fresh(channels, DType::kF32);
    r.Add(&nodes, MIXRT_OP_UNARY, Pointwise(MIXRT_UNARY_RSQRT), {var_eps},
          inv_std);
    const ValueRef scale = r.Fresh(channels, DType::kF32);
    r.Add(&nodes, MIXRT_OP_BINARY, Pointwise(MIXRT_BINARY_MUL),
          {f32(w), inv_std}, scale);
    const ValueRef mean_scaled = r.Fresh(channels, DType::kF32);
    r.Add(&nodes, MIXRT_OP_BINARY, Pointwise(MIXRT_BINARY_MUL), {mean, scale},
          mean_scaled);
    const ValueRef shift = r.Fresh(channels, DType::kF32);
    r.Add(&nodes, MIXRT_OP_BINARY, Pointwise(MIXRT_BINARY_SUB),
          {f32(b), mean_scaled}, shift);
    // Per element: x * scale + shift, the channel values broadcast.
    auto across = [&](ValueRef v) {
      v.shape = x.shape;
      v.strides.assign(x.shape.size(), 0);
      v.strides[1] = 1;
      return v;
    };
    const ValueRef xs = r.Fresh(x.shape, DType::kF32);
    r.Add(&nodes, MIXRT_OP_BINARY, Pointwise(MIXRT_BINARY_MUL),
          {f32(x), across(scale)}, xs);
    if (y.dtype == DType::kF32) {
      r.Add(&nodes, MIXRT_OP_BINARY, Pointwise(MIXRT_BINARY_ADD),
            {xs, across(shift)}, y);
    } else {
      const ValueRef sum = r.Fresh(x.shape, DType::kF32);
      r.Add(&nodes, MIXRT_OP_BINARY, Pointwise(MIXRT_BINARY_ADD),
            {xs, across(shift)}, sum);
      r.Add(&nodes, MIXRT_OP_COPY, {}, {sum}, y);
    }
    ++lowered;
  }
  g->nodes = std::move(nodes);
  return lowered;
}

}  // namespace mixrt::compiler
