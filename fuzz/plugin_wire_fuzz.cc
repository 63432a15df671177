// The out-of-process plugin channel's decoders, both sides
// (core/plugin/isolation/): what a hostile plugin host can write into the
// shared block, and what the plugin host reads of a request. The bytes
// choose a decoder and feed it:
//   0  the host's reading of an answer (TakeAnswer: sequence number,
//      claimed length, status) and then of outputs as the ABI functions
//      read them (strings, counts, a handle);
//   1  a kernel graph's steps (DecodedKernelGraphSteps), written back and
//      read again: the same steps;
//   2  a fusion graph (DecodedFusionGraph), written back and read again.
// Nothing may read or write outside what was sent, and a decoded message
// re-encodes to one that decodes the same.
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "core/plugin/isolation/fusion_graph_codec.h"
#include "core/plugin/isolation/kernel_graph_codec.h"
#include "core/plugin/isolation/shared_channel.h"
#include "fuzz/fuzz_input.h"

namespace mixrt::isolation {
namespace {

[[noreturn]] void Found(const char* what) {
  std::fprintf(stderr, "plugin_wire_fuzz: %s\n", what);
  std::abort();
}

void Answer(fuzz::FuzzInput& in) {
  static ChannelBlock* block = new ChannelBlock();
  const uint64_t asked = in.Read<uint64_t>();
  block->response_sequence =
      in.Read<uint8_t>() % 2 == 0 ? asked : in.Read<uint64_t>();
  block->response_bytes = in.Read<uint32_t>();
  const std::string payload = in.Rest();
  std::memcpy(block->payload, payload.data(),
              std::min(payload.size(), kPayloadBytes));
  std::vector<unsigned char> copy;
  size_t outputs_at = 0;
  uint32_t code = 0;
  std::string message;
  const std::string wrong =
      TakeAnswer(*block, asked, &copy, &outputs_at, &code, &message);
  if (!wrong.empty()) {
    if (block->response_sequence == asked &&
        block->response_bytes <= kPayloadBytes && copy.size() >= 8 &&
        wrong.find("status") == std::string::npos) {
      Found("a well-formed answer was refused");
    }
    return;
  }
  if (block->response_sequence != asked) Found("an answer out of sequence");
  if (copy.size() != block->response_bytes || outputs_at > copy.size()) {
    Found("the answer's length was not the claimed one");
  }
  MessageReader r(copy.data(), copy.size());
  r.Skip(outputs_at);
  std::string text;
  int32_t count = 0;
  uint64_t handle = 0;
  while (r.GetString(&text) || r.Get(&count) || r.Get(&handle)) {
    if (text.size() > MessageWriter::kMaxString) Found("an overlong string");
  }
}

void KernelSteps(fuzz::FuzzInput& in) {
  const int32_t buffers = in.Read<uint8_t>();
  const std::string bytes = in.Rest();
  MessageReader r(reinterpret_cast<const unsigned char*>(bytes.data()),
                  bytes.size());
  DecodedKernelGraphSteps steps;
  if (!steps.Read(r, buffers)) return;
  std::vector<unsigned char> payload(kPayloadBytes);
  MessageWriter w(payload.data());
  const auto same = [](const MixrtFusedKernel* k) {
    return reinterpret_cast<uint64_t>(k);
  };
  if (!WriteKernelGraphSteps(steps.steps(), steps.count(), same, w)) return;
  MessageReader again(payload.data(), w.size());
  DecodedKernelGraphSteps twice;
  if (!twice.Read(again, buffers) || twice.count() != steps.count()) {
    Found("kernel graph steps that decoded once do not decode again");
  }
  for (int32_t i = 0; i < steps.count(); ++i) {
    const MixrtKernelGraphStep &a = steps.steps()[i], &b = twice.steps()[i];
    if (a.op != b.op || a.num_inputs != b.num_inputs ||
        a.num_outputs != b.num_outputs ||
        (a.fused_kernel == nullptr) != (b.fused_kernel == nullptr)) {
      Found("a kernel graph step changed through the channel");
    }
  }
}

void FusionGraph(fuzz::FuzzInput& in) {
  const std::string bytes = in.Rest();
  MessageReader r(reinterpret_cast<const unsigned char*>(bytes.data()),
                  bytes.size());
  DecodedFusionGraph graph;
  if (!graph.Read(r)) return;
  std::vector<unsigned char> payload(kPayloadBytes);
  MessageWriter w(payload.data());
  if (!WriteFusionGraph(graph.graph(), w)) return;
  MessageReader again(payload.data(), w.size());
  DecodedFusionGraph twice;
  if (!twice.Read(again) ||
      twice.graph().num_nodes != graph.graph().num_nodes ||
      twice.graph().num_values != graph.graph().num_values) {
    Found("a fusion graph that decoded once does not decode the same again");
  }
}

}  // namespace
}  // namespace mixrt::isolation

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  mixrt::fuzz::FuzzInput in(data, size);
  switch (in.Read<uint8_t>() % 3) {
    case 0:
      mixrt::isolation::Answer(in);
      break;
    case 1:
      mixrt::isolation::KernelSteps(in);
      break;
    default:
      mixrt::isolation::FusionGraph(in);
      break;
  }
  return 0;
}
