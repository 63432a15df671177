#include "core/plugin/isolation/fusion_graph_codec.h"

#include <algorithm>
#include <cstring>

namespace mixrt::isolation {
namespace {

// Graphs larger than this are refused rather than decoded.
constexpr int32_t kMaxGraphItems = 1 << 16;

}  // namespace

bool WriteFusionGraph(const MixrtFusionGraph& graph, MessageWriter& out) {
  out.Put(graph.num_values);
  out.Put(graph.num_nodes);
  out.Put(graph.num_symbols);
  for (int32_t v = 0; v < graph.num_values; ++v) {
    const MixrtFusionValue& value = graph.values[v];
    WireTensorDesc d;
    d.dtype = value.desc.dtype;
    d.ndim = std::max(0, std::min<int32_t>(value.desc.ndim, MIXRT_MAX_DIMS));
    for (int k = 0; k < d.ndim; ++k) {
      d.shape[k] = value.desc.shape[k];
      d.strides[k] = value.desc.strides[k];
    }
    out.Put(d);
    const uint32_t has_symbols = value.dim_symbols != nullptr ? 1 : 0;
    out.Put(has_symbols);
    if (has_symbols != 0) {
      out.PutBytes(value.dim_symbols, sizeof(int32_t) * d.ndim);
    }
    out.Put(value.flags);
    out.Put(value.view_of);
    out.Put(value.view_offset);
  }
  for (int32_t n = 0; n < graph.num_nodes; ++n) {
    const MixrtFusionNode& node = graph.nodes[n];
    out.Put(node.op);
    const uint32_t attr_bytes = AttrSize(node.attrs);
    out.Put(attr_bytes);
    out.PutBytes(node.attrs, attr_bytes);
    out.Put(node.num_inputs);
    out.PutBytes(node.inputs, sizeof(int32_t) * std::max(0, node.num_inputs));
    out.Put(node.num_outputs);
    out.PutBytes(node.outputs, sizeof(int32_t) * std::max(0, node.num_outputs));
  }
  return !out.overflowed();
}

bool DecodedFusionGraph::Read(MessageReader& in) {
  int32_t num_values = 0, num_nodes = 0, num_symbols = 0;
  if (!in.Get(&num_values) || !in.Get(&num_nodes) || !in.Get(&num_symbols) ||
      num_values < 0 || num_values > kMaxGraphItems || num_nodes < 0 ||
      num_nodes > kMaxGraphItems || num_symbols < 0 ||
      num_symbols > kMaxGraphItems) {
    return false;
  }
  values_.assign(num_values, MixrtFusionValue{});
  value_descs_.assign(num_values, WireTensorDesc{});
  dim_symbols_.assign(num_values, {});
  for (int32_t v = 0; v < num_values; ++v) {
    WireTensorDesc& d = value_descs_[v];
    uint32_t has_symbols = 0;
    if (!in.Get(&d) || d.ndim < 0 || d.ndim > MIXRT_MAX_DIMS ||
        !in.Get(&has_symbols)) {
      return false;
    }
    MixrtFusionValue& value = values_[v];
    value.struct_size = sizeof(value);
    value.desc.struct_size = sizeof(value.desc);
    value.desc.dtype = d.dtype;
    value.desc.ndim = d.ndim;
    value.desc.shape = d.shape;
    value.desc.strides = d.strides;
    if (has_symbols != 0) {
      dim_symbols_[v].resize(d.ndim);
      if (!in.GetBytes(dim_symbols_[v].data(), sizeof(int32_t) * d.ndim)) {
        return false;
      }
      value.dim_symbols = dim_symbols_[v].data();
    }
    if (!in.Get(&value.flags) || !in.Get(&value.view_of) ||
        !in.Get(&value.view_offset) || value.view_of < -1 ||
        value.view_of >= num_values) {
      return false;
    }
  }
  nodes_.assign(num_nodes, MixrtFusionNode{});
  node_inputs_.assign(num_nodes, {});
  node_outputs_.assign(num_nodes, {});
  attrs_.clear();
  const auto read_indexes = [&](std::vector<int32_t>* out) {
    int32_t count = 0;
    if (!in.Get(&count) || count < 0 || count > kMaxLaunchTensors) {
      return false;
    }
    out->resize(count);
    if (!in.GetBytes(out->data(), sizeof(int32_t) * count)) return false;
    return std::all_of(out->begin(), out->end(),
                       [&](int32_t i) { return i >= 0 && i < num_values; });
  };
  for (int32_t n = 0; n < num_nodes; ++n) {
    MixrtFusionNode& node = nodes_[n];
    node.struct_size = sizeof(node);
    uint32_t attr_bytes = 0;
    if (!in.Get(&node.op) || !in.Get(&attr_bytes) ||
        attr_bytes > kMaxAttrBytes) {
      return false;
    }
    if (attr_bytes > 0) {
      attrs_.push_back(std::make_unique<AttrBytes>());
      unsigned char* bytes = attrs_.back()->bytes;
      if (!in.GetBytes(bytes, attr_bytes)) return false;
      // The extension chain does not cross processes.
      if (attr_bytes >= sizeof(size_t) + sizeof(void*)) {
        std::memset(bytes + sizeof(size_t), 0, sizeof(void*));
      }
      node.attrs = bytes;
    }
    if (!read_indexes(&node_inputs_[n]) || !read_indexes(&node_outputs_[n])) {
      return false;
    }
    node.num_inputs = static_cast<int32_t>(node_inputs_[n].size());
    node.inputs = node_inputs_[n].data();
    node.num_outputs = static_cast<int32_t>(node_outputs_[n].size());
    node.outputs = node_outputs_[n].data();
  }
  graph_ = MixrtFusionGraph{};
  graph_.struct_size = sizeof(graph_);
  graph_.num_values = num_values;
  graph_.values = values_.data();
  graph_.num_nodes = num_nodes;
  graph_.nodes = nodes_.data();
  graph_.num_symbols = num_symbols;
  return true;
}

}  // namespace mixrt::isolation
