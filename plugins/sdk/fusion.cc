#include "plugins/sdk/fusion.h"

#include <algorithm>

#include "mixrt/op_names.h"
#include "mixrt/status_macros.h"
#include "plugins/sdk/plugin.h"
#include "plugins/sdk/strings.h"

namespace mixrt::sdk {

MixrtTensorDesc FusionValue::Desc(void* data) const {
  MixrtTensorDesc d{};
  d.struct_size = sizeof(d);
  d.data = data;
  d.dtype = dtype;
  d.ndim = static_cast<int32_t>(shape.size());
  d.shape = shape.data();
  d.strides = strides.data();
  return d;
}

int64_t FusionValue::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

bool FusionValue::is_contiguous() const {
  int64_t expected = 1;
  for (int d = static_cast<int>(shape.size()) - 1; d >= 0; --d) {
    if (shape[d] != 1 && strides[d] != expected) return false;
    expected *= shape[d];
  }
  return true;
}

bool FusionValue::is_static() const {
  for (int32_t s : symbols) {
    if (s >= 0) return false;
  }
  return true;
}

StatusOr<FusionGraph> FusionGraph::Decode(const MixrtFusionGraph& g) {
  if (g.struct_size < MixrtFusionGraph_STRUCT_SIZE || g.num_values < 0 ||
      g.num_nodes < 0 || g.num_symbols < 0 ||
      (g.num_values > 0 && g.values == nullptr) ||
      (g.num_nodes > 0 && g.nodes == nullptr)) {
    return InvalidArgumentError(
        "fusion graph: short struct, negative counts or missing arrays");
  }
  FusionGraph out;
  out.num_symbols = g.num_symbols;
  out.values.resize(g.num_values);
  for (int v = 0; v < g.num_values; ++v) {
    const MixrtFusionValue& in = g.values[v];
    const std::string where = StrCat("fusion graph value ", v);
    if (in.struct_size < MixrtFusionValue_STRUCT_SIZE) {
      return InvalidArgumentError(
          StrCat(where, " has struct_size ", in.struct_size));
    }
    MIXRT_RETURN_IF_ERROR(
        internal::CheckTensorShape(in.desc, "descriptor", v, "fusion graph"));
    FusionValue& value = out.values[v];
    value.dtype = static_cast<MixrtDtype>(in.desc.dtype);
    value.shape.assign(in.desc.shape, in.desc.shape + in.desc.ndim);
    value.strides.assign(in.desc.strides, in.desc.strides + in.desc.ndim);
    if (in.dim_symbols != nullptr) {
      value.symbols.assign(in.dim_symbols, in.dim_symbols + in.desc.ndim);
      for (int32_t s : value.symbols) {
        if (s < -1 || s >= g.num_symbols) {
          return InvalidArgumentError(StrCat(
              where, " names symbol ", s, "; the graph has ", g.num_symbols));
        }
      }
    }
    value.flags = in.flags;
    value.view_of = in.view_of;
    value.view_offset = in.view_offset;
    if (in.view_of < -1 || in.view_of >= g.num_values || in.view_of == v ||
        in.view_offset < 0) {
      return InvalidArgumentError(StrCat(where, " views value ", in.view_of,
                                         " at offset ", in.view_offset));
    }
  }
  for (int v = 0; v < g.num_values; ++v) {
    const int base = out.values[v].view_of;
    if (base >= 0 && out.values[base].view_of >= 0) {
      return InvalidArgumentError(StrCat(
          "fusion graph value ", v, " views value ", base,
          ", itself a view: a view names the value that owns the memory"));
    }
  }
  out.producer.assign(g.num_values, -1);
  out.readers.assign(g.num_values, {});
  out.nodes.resize(g.num_nodes);
  for (int i = 0; i < g.num_nodes; ++i) {
    const MixrtFusionNode& in = g.nodes[i];
    const std::string where =
        StrCat("fusion graph node ", i, " (",
               MixrtOpName(static_cast<MixrtOp>(in.op)), ")");
    if (in.struct_size < MixrtFusionNode_STRUCT_SIZE ||
        in.op >= MIXRT_OP_COUNT || in.num_inputs < 0 || in.num_outputs < 0 ||
        (in.num_inputs > 0 && in.inputs == nullptr) ||
        (in.num_outputs > 0 && in.outputs == nullptr)) {
      return InvalidArgumentError(
          StrCat(where, ": short struct, unknown op or missing arrays"));
    }
    FusionNode& node = out.nodes[i];
    node.op = static_cast<MixrtOp>(in.op);
    if (in.attrs != nullptr) {
      const auto* head = static_cast<const MixrtScalarAttrs*>(in.attrs);
      const auto* bytes = static_cast<const uint8_t*>(in.attrs);
      node.attrs.assign(bytes, bytes + head->struct_size);
      node.attrs_extended = head->ext != nullptr;
    }
    for (int k = 0; k < in.num_inputs; ++k) {
      const int v = in.inputs[k];
      if (v < 0 || v >= g.num_values) {
        return InvalidArgumentError(
            StrCat(where, ": input ", k, " is value ", v));
      }
      const int base = out.values[v].view_of >= 0 ? out.values[v].view_of : v;
      if (out.producer[base] < 0 &&
          !out.values[base].has(MIXRT_FUSION_VALUE_INPUT)) {
        return InvalidArgumentError(
            StrCat(where, ": reads value ", v,
                   " before any node writes it (and it is no INPUT)"));
      }
      node.inputs.push_back(v);
      out.readers[v].push_back(i);
      if (base != v) out.readers[base].push_back(i);
    }
    for (int k = 0; k < in.num_outputs; ++k) {
      const int v = in.outputs[k];
      if (v < 0 || v >= g.num_values || out.producer[v] >= 0 ||
          out.values[v].view_of >= 0 ||
          out.values[v].has(MIXRT_FUSION_VALUE_INPUT)) {
        return InvalidArgumentError(StrCat(
            where, ": output ", k, " is value ", v,
            ", which is out of range, a view, an INPUT or written twice"));
      }
      out.producer[v] = i;
      node.outputs.push_back(v);
    }
  }
  return out;
}

std::vector<int> FusionGraph::GroupNodes(Span<const int> group_of_node,
                                         int group) {
  std::vector<int> nodes;
  for (size_t i = 0; i < group_of_node.size(); ++i) {
    if (group_of_node[i] == group) nodes.push_back(static_cast<int>(i));
  }
  return nodes;
}

std::vector<int> FusionGraph::GroupInputs(Span<const int> group_of_node,
                                          int group) const {
  std::vector<bool> is_input(values.size(), false);
  for (int i : GroupNodes(group_of_node, group)) {
    for (int v : nodes[i].inputs) {
      const int base = values[v].view_of >= 0 ? values[v].view_of : v;
      const int p = producer[base];
      if (p < 0 || group_of_node[p] != group) is_input[v] = true;
    }
  }
  std::vector<int> result;
  for (size_t v = 0; v < values.size(); ++v) {
    if (is_input[v]) result.push_back(static_cast<int>(v));
  }
  return result;
}

bool SplitAtReducedDims(Span<const int64_t> shape, uint32_t axes_mask,
                        ReducedSplit* split) {
  int first = -1, last = -1;
  for (int d = 0; d < static_cast<int>(shape.size()); ++d) {
    if (((axes_mask >> d) & 1u) == 0) continue;
    if (last >= 0 && last != d - 1) return false;
    if (first < 0) first = d;
    last = d;
  }
  if (first < 0 || (shape.size() < 32 && (axes_mask >> shape.size()) != 0))
    return false;
  *split = ReducedSplit{};
  for (int d = 0; d < static_cast<int>(shape.size()); ++d) {
    (d < first   ? split->outer
     : d <= last ? split->middle
                 : split->inner) *= shape[d];
  }
  return true;
}

bool FusionGraph::IsPlainReshape(int v) const {
  const FusionValue& view = values[v];
  if (view.view_of < 0) return false;
  const FusionValue& base = values[view.view_of];
  return view.view_offset == 0 && view.dtype == base.dtype &&
         view.is_static() && base.is_static() && view.is_contiguous() &&
         base.is_contiguous() && view.numel() == base.numel();
}

int FusionGraph::ReshapeBase(int v) const {
  return IsPlainReshape(v) ? values[v].view_of : v;
}

std::vector<int> FusionGraph::GroupStores(Span<const int> group_of_node,
                                          int group) const {
  std::vector<int> result;
  for (size_t v = 0; v < values.size(); ++v) {
    const int p = producer[v];
    if (p < 0 || group_of_node[p] != group) continue;
    bool store = values[v].has(MIXRT_FUSION_VALUE_OUTPUT);
    for (int r : readers[v]) store |= group_of_node[r] != group;
    // A view of it read inside the group still needs the memory, unless
    // the view is a plain reshape (plugin_api.h): then the reader takes
    // the value itself.
    for (int r : readers[v]) {
      for (int in : nodes[r].inputs) {
        store |=
            values[in].view_of == static_cast<int>(v) && !IsPlainReshape(in);
      }
    }
    if (store) result.push_back(static_cast<int>(v));
  }
  return result;
}

}  // namespace mixrt::sdk
