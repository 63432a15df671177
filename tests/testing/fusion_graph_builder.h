// Fusion graphs (ABI 1.1, as the SDK decodes them) built value by value
// for tests of plugins' claims, fused loops and generated code.
#ifndef MIXRT_TESTS_TESTING_FUSION_GRAPH_BUILDER_H_
#define MIXRT_TESTS_TESTING_FUSION_GRAPH_BUILDER_H_

#include <cstring>
#include <vector>

#include "plugins/sdk/fusion.h"

namespace mixrt::testing {

// A graph built value by value: contiguous values unless strides are given.
struct Builder {
  sdk::FusionGraph g;
  int Value(MixrtDtype dtype, std::vector<int64_t> shape, uint32_t flags = 0,
            std::vector<int64_t> strides = {}) {
    sdk::FusionValue v;
    v.dtype = dtype;
    v.shape = shape;
    if (strides.empty()) {
      strides.resize(shape.size());
      int64_t s = 1;
      for (int d = static_cast<int>(shape.size()) - 1; d >= 0; --d) {
        strides[d] = s;
        s *= shape[d];
      }
    }
    v.strides = strides;
    v.flags = flags;
    g.values.push_back(v);
    g.producer.push_back(-1);
    g.readers.emplace_back();
    return static_cast<int>(g.values.size() - 1);
  }
  int Input(MixrtDtype dtype, std::vector<int64_t> shape,
            std::vector<int64_t> strides = {}) {
    return Value(dtype, shape, MIXRT_FUSION_VALUE_INPUT, strides);
  }
  template <typename Attrs>
  int Node(MixrtOp op, Attrs attrs, std::vector<int> in, std::vector<int> out) {
    attrs.struct_size = sizeof(attrs);
    std::vector<uint8_t> bytes(sizeof(attrs));
    std::memcpy(bytes.data(), &attrs, sizeof(attrs));
    return Add(op, std::move(bytes), std::move(in), std::move(out));
  }
  int NoAttrs(MixrtOp op, std::vector<int> in, std::vector<int> out) {
    return Add(op, {}, std::move(in), std::move(out));
  }

 private:
  int Add(MixrtOp op, std::vector<uint8_t> attrs, std::vector<int> in,
          std::vector<int> out) {
    sdk::FusionNode n;
    n.op = op;
    n.attrs = std::move(attrs);
    n.inputs = in;
    n.outputs = out;
    const int i = static_cast<int>(g.nodes.size());
    for (int v : in) g.readers[v].push_back(i);
    for (int v : out) g.producer[v] = i;
    g.nodes.push_back(n);
    return i;
  }
};

inline MixrtPointwiseAttrs Kind(uint32_t kind) {
  MixrtPointwiseAttrs a{};
  a.kind = kind;
  return a;
}

inline MixrtReduceAttrs Reduce(MixrtReduceKind kind, uint32_t axes) {
  MixrtReduceAttrs a{};
  a.kind = kind;
  a.axes_mask = axes;
  return a;
}

// A bf16 chain over [rows, cols] with both kinds of broadcast, a cast and
// a compare: a = x + bias (a row), m = a * s (a scalar), r = relu(m)
// stored, mf = m as f32 stored, gt = r > x stored as bool.
struct PointwiseChain {
  Builder b;
  int x, bias, s, a, m, r, mf, gt;
  PointwiseChain(int64_t rows, int64_t cols) {
    x = b.Input(MIXRT_DTYPE_BF16, {rows, cols});
    bias = b.Input(MIXRT_DTYPE_BF16, {rows, cols}, {0, 1});
    s = b.Input(MIXRT_DTYPE_BF16, {rows, cols}, {0, 0});
    a = b.Value(MIXRT_DTYPE_BF16, {rows, cols});
    m = b.Value(MIXRT_DTYPE_BF16, {rows, cols});
    r = b.Value(MIXRT_DTYPE_BF16, {rows, cols}, MIXRT_FUSION_VALUE_OUTPUT);
    mf = b.Value(MIXRT_DTYPE_F32, {rows, cols}, MIXRT_FUSION_VALUE_OUTPUT);
    gt = b.Value(MIXRT_DTYPE_BOOL, {rows, cols}, MIXRT_FUSION_VALUE_OUTPUT);
    b.Node(MIXRT_OP_BINARY, Kind(MIXRT_BINARY_ADD), {x, bias}, {a});
    b.Node(MIXRT_OP_BINARY, Kind(MIXRT_BINARY_MUL), {a, s}, {m});
    b.Node(MIXRT_OP_UNARY, Kind(MIXRT_UNARY_RELU), {m}, {r});
    b.NoAttrs(MIXRT_OP_COPY, {m}, {mf});
    b.Node(MIXRT_OP_COMPARE, Kind(MIXRT_COMPARE_GT), {r, x}, {gt});
  }
};

// relu over [4, 4] and the column sum of its result: a pointwise op and
// the reduction that ends its chain.
inline Builder ReluThenColumnSum() {
  Builder b;
  const int x = b.Input(MIXRT_DTYPE_F32, {4, 4});
  const int y = b.Value(MIXRT_DTYPE_F32, {4, 4});
  const int s = b.Value(MIXRT_DTYPE_F32, {1, 4}, MIXRT_FUSION_VALUE_OUTPUT);
  b.Node(MIXRT_OP_UNARY, Kind(MIXRT_UNARY_RELU), {x}, {y});
  b.Node(MIXRT_OP_REDUCE, Reduce(MIXRT_REDUCE_SUM, 1u), {y}, {s});
  return b;
}

}  // namespace mixrt::testing

#endif  // MIXRT_TESTS_TESTING_FUSION_GRAPH_BUILDER_H_
