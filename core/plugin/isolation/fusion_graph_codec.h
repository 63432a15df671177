// A fusion subgraph (MixrtFusionGraph, plugin_api.h) on the channel: the
// host writes it for fusion_claim and fusion_compile, the plugin host reads
// it back into structs that live as long as the decoder.
#ifndef MIXRT_CORE_PLUGIN_ISOLATION_FUSION_GRAPH_CODEC_H_
#define MIXRT_CORE_PLUGIN_ISOLATION_FUSION_GRAPH_CODEC_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "core/plugin/isolation/shared_channel.h"
#include "core/plugin/isolation/wire_format.h"
#include "mixrt/plugin_api.h"

namespace mixrt::isolation {

// False when the graph does not fit the payload.
bool WriteFusionGraph(const MixrtFusionGraph& graph, MessageWriter& out);

// The graph as the plugin receives it; every pointer in graph() points
// into this object.
class DecodedFusionGraph {
 public:
  // False on a malformed message (counts out of range, indexes outside the
  // graph, a truncated payload).
  bool Read(MessageReader& in);
  const MixrtFusionGraph& graph() const { return graph_; }

 private:
  struct AttrBytes {
    alignas(16) unsigned char bytes[kMaxAttrBytes];
  };
  MixrtFusionGraph graph_{};
  std::vector<MixrtFusionValue> values_;
  std::vector<WireTensorDesc> value_descs_;
  std::vector<std::vector<int32_t>> dim_symbols_;
  std::vector<MixrtFusionNode> nodes_;
  std::vector<std::vector<int32_t>> node_inputs_, node_outputs_;
  std::vector<std::unique_ptr<AttrBytes>> attrs_;
};

}  // namespace mixrt::isolation

#endif  // MIXRT_CORE_PLUGIN_ISOLATION_FUSION_GRAPH_CODEC_H_
