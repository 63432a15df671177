// The pieces both sides of an out-of-process plugin share
// (core/plugin/isolation/): messages that never read or write past the
// payload whatever the other side claims, the arena's ranges, and the
// fusion graph and kernel graph codecs, which refuse what they cannot
// decode instead of guessing.
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "core/plugin/isolation/arena_allocator.h"
#include "core/plugin/isolation/fusion_graph_codec.h"
#include "core/plugin/isolation/kernel_graph_codec.h"
#include "core/plugin/isolation/shared_channel.h"
#include "gtest/gtest.h"

namespace mixrt::isolation {
namespace {

std::vector<unsigned char> Payload() {
  return std::vector<unsigned char>(kPayloadBytes, 0);
}

TEST(Messages, RoundTripAndRefuseReadingPastTheEnd) {
  std::vector<unsigned char> payload = Payload();
  MessageWriter w(payload.data());
  ASSERT_TRUE(w.Put(int32_t{7}));
  ASSERT_TRUE(w.PutString("matmul"));
  MessageReader r(payload.data(), w.size());
  int32_t seven = 0;
  std::string text;
  ASSERT_TRUE(r.Get(&seven));
  ASSERT_TRUE(r.GetString(&text));
  EXPECT_EQ(seven, 7);
  EXPECT_EQ(text, "matmul");
  int32_t more = 0;
  EXPECT_FALSE(r.Get(&more));  // Nothing left.
}

TEST(Messages, AHostileLengthNeverReadsPastWhatWasSent) {
  std::vector<unsigned char> payload = Payload();
  const uint32_t huge = 1u << 31;  // A string "of 2 GiB".
  std::memcpy(payload.data(), &huge, sizeof(huge));
  MessageReader r(payload.data(), 64);
  std::string text;
  EXPECT_FALSE(r.GetString(&text));
  // A claimed size beyond the payload reads nothing at all.
  MessageReader lying(payload.data(), kPayloadBytes + 1);
  uint32_t word = 0;
  EXPECT_FALSE(lying.Get(&word));
  // A string just over the limit is refused, not cut.
  MessageWriter w(payload.data());
  const uint32_t long_length = MessageWriter::kMaxString + 1;
  w.Put(long_length);
  MessageReader r2(payload.data(), kPayloadBytes);
  EXPECT_FALSE(r2.GetString(&text));
}

TEST(Messages, AWriterStopsAtThePayloadsEnd) {
  std::vector<unsigned char> payload = Payload();
  MessageWriter w(payload.data());
  std::vector<unsigned char> big(kPayloadBytes - 4, 1);
  ASSERT_TRUE(w.PutBytes(big.data(), big.size()));
  EXPECT_FALSE(w.Put(uint64_t{1}));  // 8 more do not fit.
  EXPECT_TRUE(w.overflowed());
  EXPECT_FALSE(w.Put(uint8_t{1}));  // Nor anything after an overflow.
  EXPECT_EQ(w.size(), kPayloadBytes - 4);
}

TEST(Arena, RangesAreAlignedReusedAndMerged) {
  ArenaAllocator arena(1 << 20, 256);
  const std::optional<uint64_t> a = arena.Allocate(100, 64);
  const std::optional<uint64_t> b = arena.Allocate(1000, 4096);
  ASSERT_TRUE(a.has_value() && b.has_value());
  EXPECT_EQ(*a % 256, 0u);
  EXPECT_EQ(*b % 4096, 0u);
  EXPECT_EQ(arena.bytes_in_use(), 256u + 1024u);
  EXPECT_EQ(arena.Free(*a), 256u);
  EXPECT_EQ(arena.Free(*a), 0u);  // Twice: nothing happens.
  EXPECT_EQ(arena.Free(12345), 0u);
  EXPECT_EQ(arena.Free(*b), 1024u);
  EXPECT_EQ(arena.bytes_in_use(), 0u);
  // Everything merged back: the whole arena fits again.
  const std::optional<uint64_t> all = arena.Allocate(1 << 20, 256);
  ASSERT_TRUE(all.has_value());
  EXPECT_EQ(*all, 0u);
  EXPECT_FALSE(arena.Allocate(256, 256).has_value());
  EXPECT_FALSE(arena.Allocate(0, 256).has_value());
}

// relu(x) then x + that: two nodes over three values, one symbol.
struct SmallGraph {
  int64_t shape[2] = {4, 8}, strides[2] = {8, 1};
  int32_t symbols[2] = {0, -1};
  MixrtFusionValue values[3];
  int32_t relu_in[1] = {0}, relu_out[1] = {1};
  int32_t add_in[2] = {0, 1}, add_out[1] = {2};
  MixrtPointwiseAttrs relu{}, add{};
  MixrtFusionNode nodes[2];
  MixrtFusionGraph graph{};

  SmallGraph() {
    for (int v = 0; v < 3; ++v) {
      values[v] = MixrtFusionValue{};
      values[v].struct_size = sizeof(values[v]);
      values[v].desc.struct_size = sizeof(values[v].desc);
      values[v].desc.ndim = 2;
      values[v].desc.shape = shape;
      values[v].desc.strides = strides;
      values[v].dim_symbols = symbols;
      values[v].view_of = -1;
    }
    values[0].flags = MIXRT_FUSION_VALUE_INPUT;
    values[2].flags = MIXRT_FUSION_VALUE_OUTPUT;
    relu.struct_size = add.struct_size = sizeof(relu);
    relu.kind = MIXRT_UNARY_RELU;
    add.kind = MIXRT_BINARY_ADD;
    nodes[0] = {sizeof(MixrtFusionNode),
                nullptr,
                MIXRT_OP_UNARY,
                &relu,
                1,
                relu_in,
                1,
                relu_out};
    nodes[1] = {sizeof(MixrtFusionNode),
                nullptr,
                MIXRT_OP_BINARY,
                &add,
                2,
                add_in,
                1,
                add_out};
    graph = {sizeof(graph), nullptr, 3, values, 2, nodes, 1};
  }
};

TEST(FusionGraphCodec, RoundTripsAndRefusesTruncatedOrOutOfRange) {
  SmallGraph g;
  std::vector<unsigned char> payload = Payload();
  MessageWriter w(payload.data());
  ASSERT_TRUE(WriteFusionGraph(g.graph, w));
  {
    MessageReader r(payload.data(), w.size());
    DecodedFusionGraph decoded;
    ASSERT_TRUE(decoded.Read(r));
    const MixrtFusionGraph& d = decoded.graph();
    ASSERT_EQ(d.num_values, 3);
    ASSERT_EQ(d.num_nodes, 2);
    EXPECT_EQ(d.num_symbols, 1);
    EXPECT_EQ(d.values[1].desc.shape[1], 8);
    EXPECT_EQ(d.values[0].dim_symbols[0], 0);
    EXPECT_EQ(d.values[2].flags, MIXRT_FUSION_VALUE_OUTPUT);
    EXPECT_EQ(d.nodes[1].inputs[1], 1);
    const auto* attrs =
        static_cast<const MixrtPointwiseAttrs*>(d.nodes[0].attrs);
    EXPECT_EQ(attrs->kind, MIXRT_UNARY_RELU);
    EXPECT_EQ(attrs->ext, nullptr);
  }
  // Every shorter message is refused.
  for (size_t cut = 0; cut < w.size(); cut += 7) {
    MessageReader r(payload.data(), cut);
    DecodedFusionGraph decoded;
    EXPECT_FALSE(decoded.Read(r)) << cut;
  }
  // A node reading a value the graph does not have.
  g.add_in[1] = 3;
  MessageWriter w2(payload.data());
  ASSERT_TRUE(WriteFusionGraph(g.graph, w2));
  MessageReader r2(payload.data(), w2.size());
  DecodedFusionGraph decoded;
  EXPECT_FALSE(decoded.Read(r2));
}

TEST(KernelGraphCodec, RoundTripsAndRefusesABufferOutOfRange) {
  int64_t shape[1] = {4}, strides[1] = {1};
  MixrtTensorDesc d{};
  d.struct_size = sizeof(d);
  d.ndim = 1;
  d.shape = shape;
  d.strides = strides;
  MixrtTensorDesc in[2] = {d, d}, out[1] = {d};
  int32_t in_b[2] = {0, 1}, out_b[1] = {2};
  uint64_t in_o[2] = {0, 16}, out_o[1] = {32};
  MixrtPointwiseAttrs add{};
  add.struct_size = sizeof(add);
  add.kind = MIXRT_BINARY_MUL;
  MixrtKernelGraphStep step{};
  step.struct_size = sizeof(step);
  step.op = MIXRT_OP_BINARY;
  step.num_inputs = 2;
  step.inputs = in;
  step.num_outputs = 1;
  step.outputs = out;
  step.input_buffers = in_b;
  step.input_offsets = in_o;
  step.output_buffers = out_b;
  step.output_offsets = out_o;
  step.attrs = &add;
  std::vector<unsigned char> payload = Payload();
  MessageWriter w(payload.data());
  ASSERT_TRUE(WriteKernelGraphSteps(
      &step, 1,
      [](const MixrtFusedKernel* k) { return reinterpret_cast<uint64_t>(k); },
      w));
  {
    MessageReader r(payload.data(), w.size());
    DecodedKernelGraphSteps decoded;
    ASSERT_TRUE(decoded.Read(r, 3));
    ASSERT_EQ(decoded.count(), 1);
    const MixrtKernelGraphStep& s = decoded.steps()[0];
    EXPECT_EQ(s.output_buffers[0], 2);
    EXPECT_EQ(s.input_offsets[1], 16u);
    EXPECT_EQ(s.fused_kernel, nullptr);
    EXPECT_EQ(static_cast<const MixrtPointwiseAttrs*>(s.attrs)->kind,
              MIXRT_BINARY_MUL);
  }
  MessageReader r(payload.data(), w.size());
  DecodedKernelGraphSteps decoded;
  EXPECT_FALSE(decoded.Read(r, 2));  // Buffer 2 of 2.
}

}  // namespace
}  // namespace mixrt::isolation
