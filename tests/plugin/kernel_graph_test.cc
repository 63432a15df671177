// Kernel graphs (ABI 1.1) through the host's Backend on the CPU plugin:
// a graph runs its steps in order on the buffers of each run, honours byte
// offsets, and refuses bad steps and runs naming the step.
#include <cstring>
#include <vector>

#include "absl/status/status.h"
#include "core/plugin/registry.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/test_plugins.h"

namespace mixrt {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

const Backend* Cpu() { return testing::CpuDevice().backend(); }

MixrtTensorDesc Desc(const int64_t* shape, const int64_t* strides) {
  MixrtTensorDesc d{};
  d.struct_size = sizeof(d);
  d.dtype = MIXRT_DTYPE_F32;
  d.ndim = 1;
  d.shape = shape;
  d.strides = strides;
  return d;
}

MixrtPointwiseAttrs Binary(MixrtBinaryKind kind) {
  MixrtPointwiseAttrs a{};
  a.struct_size = sizeof(a);
  a.kind = kind;
  return a;
}

// Two steps over three buffers: buffer 2 = buffer 0 + buffer 1 (elements
// 0..3), then buffer 2's elements 4..7 = (buffer 2's 0..3) * buffer 0.
struct AddThenMul {
  int64_t shape[1] = {4}, strides[1] = {1};
  MixrtTensorDesc d = Desc(shape, strides);
  MixrtTensorDesc in_add[2] = {d, d}, out_add[1] = {d};
  MixrtTensorDesc in_mul[2] = {d, d}, out_mul[1] = {d};
  int32_t add_in_buffers[2] = {0, 1}, add_out_buffers[1] = {2};
  uint64_t add_in_offsets[2] = {0, 0}, add_out_offsets[1] = {0};
  int32_t mul_in_buffers[2] = {2, 0}, mul_out_buffers[1] = {2};
  uint64_t mul_in_offsets[2] = {0, 0}, mul_out_offsets[1] = {4 * sizeof(float)};
  MixrtPointwiseAttrs add = Binary(MIXRT_BINARY_ADD);
  MixrtPointwiseAttrs mul = Binary(MIXRT_BINARY_MUL);
  MixrtKernelGraphStep steps[2];

  AddThenMul() {
    steps[0] = Step(in_add, out_add, add_in_buffers, add_in_offsets,
                    add_out_buffers, add_out_offsets, &add);
    steps[1] = Step(in_mul, out_mul, mul_in_buffers, mul_in_offsets,
                    mul_out_buffers, mul_out_offsets, &mul);
  }
  static MixrtKernelGraphStep Step(MixrtTensorDesc* in, MixrtTensorDesc* out,
                                   int32_t* in_b, uint64_t* in_o,
                                   int32_t* out_b, uint64_t* out_o,
                                   const void* attrs) {
    MixrtKernelGraphStep s{};
    s.struct_size = sizeof(s);
    s.op = MIXRT_OP_BINARY;
    s.num_inputs = 2;
    s.inputs = in;
    s.num_outputs = 1;
    s.outputs = out;
    s.input_buffers = in_b;
    s.input_offsets = in_o;
    s.output_buffers = out_b;
    s.output_offsets = out_o;
    s.attrs = attrs;
    return s;
  }
};

TEST(KernelGraph, RunsItsStepsOnEachRunsBuffers) {
  ASSERT_NE(Cpu(), nullptr);
  ASSERT_TRUE(Cpu()->has_kernel_graphs());
  auto graph = [] {
    AddThenMul g;  // Gone before the runs: the plugin copied what it needs.
    return Cpu()->CreateKernelGraph(0, 3, g.steps);
  }();
  ASSERT_TRUE(graph.ok()) << graph.status();
  std::vector<float> a = {1, 2, 3, 4}, b = {10, 20, 30, 40}, out(8, -1);
  std::vector<void*> buffers = {a.data(), b.data(), out.data()};
  ASSERT_TRUE((*graph)->Run(buffers).ok());
  EXPECT_THAT(out, ElementsAre(11, 22, 33, 44, 11, 44, 99, 176));
  // New buffers, same graph.
  std::vector<float> a2 = {2, 2, 2, 2}, b2 = {1, 0, -1, -2}, out2(8, -1);
  buffers = {a2.data(), b2.data(), out2.data()};
  ASSERT_TRUE((*graph)->Run(buffers).ok());
  EXPECT_THAT(out2, ElementsAre(3, 2, 1, 0, 6, 4, 2, 0));
}

TEST(KernelGraph, RefusesBadStepsNamingThem) {
  ASSERT_NE(Cpu(), nullptr);
  {
    AddThenMul g;
    g.mul_out_buffers[0] = 3;  // Only 3 buffers.
    auto graph = Cpu()->CreateKernelGraph(0, 3, g.steps);
    ASSERT_FALSE(graph.ok());
    EXPECT_THAT(graph.status().message(),
                HasSubstr("step 1 (binary): output 0 is in buffer 3 of 3"));
  }
  {
    AddThenMul g;
    MixrtExtensionBase ext{};
    g.add.ext = &ext;  // A chain the plugin cannot copy.
    auto graph = Cpu()->CreateKernelGraph(0, 3, g.steps);
    ASSERT_FALSE(graph.ok());
    EXPECT_TRUE(absl::IsUnimplemented(graph.status())) << graph.status();
    EXPECT_THAT(graph.status().message(), HasSubstr("step 0 (binary)"));
  }
  {
    AddThenMul g;
    g.shape[0] = -4;
    EXPECT_THAT(Cpu()->CreateKernelGraph(0, 3, g.steps).status().message(),
                HasSubstr("step 0 (binary): input 0 has a negative size"));
  }
}

TEST(KernelGraph, ARunWithoutABufferItNeedsFailsNamingTheStep) {
  ASSERT_NE(Cpu(), nullptr);
  AddThenMul g;
  auto graph = Cpu()->CreateKernelGraph(0, 3, g.steps);
  ASSERT_TRUE(graph.ok()) << graph.status();
  std::vector<float> a = {1, 2, 3, 4}, out(8, -1);
  std::vector<void*> buffers = {a.data(), nullptr, out.data()};
  int failed_step = -2;
  const absl::Status run = (*graph)->Run(buffers, &failed_step);
  ASSERT_FALSE(run.ok());
  EXPECT_THAT(run.message(), HasSubstr("step 0 (binary): buffer 1 is NULL"));
  EXPECT_EQ(failed_step, 0);  // failed_step (ABI 1.1), not the text.
  EXPECT_THAT(out, ElementsAre(-1, -1, -1, -1, -1, -1, -1, -1));
}

TEST(KernelGraph, AKernelErrorNamesItsStep) {
  ASSERT_NE(Cpu(), nullptr);
  AddThenMul g;
  g.mul.kind = 1000;  // Not a binary kind: refused when the step runs.
  auto graph = Cpu()->CreateKernelGraph(0, 3, g.steps);
  ASSERT_TRUE(graph.ok()) << graph.status();
  std::vector<float> a = {1, 2, 3, 4}, b = {1, 1, 1, 1}, out(8, -1);
  std::vector<void*> buffers = {a.data(), b.data(), out.data()};
  int failed_step = -2;
  const absl::Status run = (*graph)->Run(buffers, &failed_step);
  ASSERT_FALSE(run.ok());
  EXPECT_THAT(run.message(), HasSubstr("kernel_graph_run"));
  EXPECT_THAT(run.message(), HasSubstr("step 1 (binary)"));
  EXPECT_EQ(failed_step, 1);
  // The step before it ran.
  EXPECT_THAT(std::vector<float>(out.begin(), out.begin() + 4),
              ElementsAre(2, 3, 4, 5));
}

TEST(KernelGraph, AnErrorOfNoStepSaysNone) {
  ASSERT_NE(Cpu(), nullptr);
  AddThenMul g;
  auto graph = Cpu()->CreateKernelGraph(0, 3, g.steps);
  ASSERT_TRUE(graph.ok()) << graph.status();
  int failed_step = -2;
  const absl::Status run = (*graph)->Run({}, &failed_step);
  ASSERT_FALSE(run.ok());
  EXPECT_THAT(run.message(), HasSubstr("buffers is NULL"));
  EXPECT_EQ(failed_step, -1);
}

}  // namespace
}  // namespace mixrt
