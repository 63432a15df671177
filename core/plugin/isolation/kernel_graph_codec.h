// A kernel graph's steps (MixrtKernelGraphStep, plugin_api.h) on the
// channel: the host writes them for kernel_graph_create, the plugin host
// reads them back into structs that live as long as the decoder.
#ifndef MIXRT_CORE_PLUGIN_ISOLATION_KERNEL_GRAPH_CODEC_H_
#define MIXRT_CORE_PLUGIN_ISOLATION_KERNEL_GRAPH_CODEC_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "core/plugin/isolation/shared_channel.h"
#include "core/plugin/isolation/wire_format.h"
#include "mixrt/plugin_api.h"

namespace mixrt::isolation {

// False when the steps do not fit the payload. A fused kernel travels as
// the plugin's handle: `plugin_kernel` maps the caller's handle to it (the
// host gives callers handles of its own, plugin_host_process.h); the
// caller checks every step's kernel is known first.
bool WriteKernelGraphSteps(
    const MixrtKernelGraphStep* steps, int32_t count,
    const std::function<uint64_t(const MixrtFusedKernel*)>& plugin_kernel,
    MessageWriter& out);

class DecodedKernelGraphSteps {
 public:
  // False on a malformed message; `num_buffers` bounds the buffer indexes.
  bool Read(MessageReader& in, int32_t num_buffers);
  const MixrtKernelGraphStep* steps() const { return steps_.data(); }
  int32_t count() const { return static_cast<int32_t>(steps_.size()); }

 private:
  struct Step {
    std::vector<WireTensorDesc> wire;
    std::vector<MixrtTensorDesc> descs;
    std::vector<int32_t> buffers;
    std::vector<uint64_t> offsets;
    std::vector<int32_t> fused_values;
    alignas(16) unsigned char attrs[kMaxAttrBytes];
  };
  std::vector<std::unique_ptr<Step>> storage_;
  std::vector<MixrtKernelGraphStep> steps_;
};

}  // namespace mixrt::isolation

#endif  // MIXRT_CORE_PLUGIN_ISOLATION_KERNEL_GRAPH_CODEC_H_
