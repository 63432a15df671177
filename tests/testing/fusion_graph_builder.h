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
    sdk::FusionNode n;
    n.op = op;
    attrs.struct_size = sizeof(attrs);
    n.attrs.resize(sizeof(attrs));
    std::memcpy(n.attrs.data(), &attrs, sizeof(attrs));
    n.inputs = in;
    n.outputs = out;
    const int i = static_cast<int>(g.nodes.size());
    for (int v : in) g.readers[v].push_back(i);
    for (int v : out) g.producer[v] = i;
    g.nodes.push_back(n);
    return i;
  }
  int NoAttrs(MixrtOp op, std::vector<int> in, std::vector<int> out) {
    sdk::FusionNode n;
    n.op = op;
    n.inputs = in;
    n.outputs = out;
    const int i = static_cast<int>(g.nodes.size());
    for (int v : in) g.readers[v].push_back(i);
    for (int v : out) g.producer[v] = i;
    g.nodes.push_back(n);
    return i;
  }
};

MixrtPointwiseAttrs Kind(uint32_t kind) {
  MixrtPointwiseAttrs a{};
  a.kind = kind;
  return a;
}

MixrtReduceAttrs Reduce(MixrtReduceKind kind, uint32_t axes) {
  MixrtReduceAttrs a{};
  a.kind = kind;
  a.axes_mask = axes;
  return a;
}

}  // namespace mixrt::testing

#endif  // MIXRT_TESTS_TESTING_FUSION_GRAPH_BUILDER_H_
