// sdk::LoopProgram: what a fused loop group is described as (loads with
// their strides, one step per node, the stores), the single rule for which
// nodes a loop runs, and the refusals that name what a loop cannot
// express: reductions over different dims of one group (the interpreter
// once took the last one's split for all), integer loads and GELU's
// gradient for the emitter.
#include "plugins/sdk/loop_program.h"

#include <vector>

#include "backends/cpu/fusion/fused_loop.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "plugins/sdk/loop_codegen.h"
#include "tests/testing/fusion_graph_builder.h"

namespace mixrt {
namespace {

using testing::Builder;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using testing::Kind;
using testing::Reduce;
using K = sdk::LoopStepKind;

TEST(LoopProgram, TheChainIsItsLoadsOneStepPerNodeAndItsStores) {
  testing::PointwiseChain c(7, 301);
  const std::vector<int> groups = cpu::ClaimFusedLoops(c.b.g);
  auto p = sdk::BuildLoopProgram(c.b.g, groups, 0);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->shape, (std::vector<int64_t>{7, 301}));
  EXPECT_EQ(p->numel, 7 * 301);
  ASSERT_EQ(p->loads.size(), 3u);
  EXPECT_EQ(p->loads[0].value, c.x);
  EXPECT_TRUE(p->loads[0].contiguous);
  EXPECT_EQ(p->loads[1].value, c.bias);
  EXPECT_EQ(p->loads[1].strides, (std::vector<int64_t>{0, 1}));
  EXPECT_FALSE(p->loads[1].contiguous);
  EXPECT_EQ(p->loads[2].value, c.s);
  EXPECT_EQ(p->loads[2].strides, (std::vector<int64_t>{0, 0}));
  std::vector<K> kinds;
  for (const sdk::LoopStep& st : p->steps) kinds.push_back(st.kind);
  EXPECT_THAT(kinds, ElementsAre(K::kAdd, K::kMul, K::kRelu, K::kCopy, K::kGt));
  EXPECT_EQ(p->steps[3].out_dtype, MIXRT_DTYPE_F32);
  EXPECT_EQ(p->steps[4].out_dtype, MIXRT_DTYPE_BOOL);
  std::vector<int> stored;
  for (const sdk::LoopStore& s : p->stores) stored.push_back(s.value);
  EXPECT_THAT(stored, ::testing::UnorderedElementsAre(c.r, c.mf, c.gt));
  EXPECT_TRUE(p->reductions.empty());
}

TEST(LoopProgram, AReductionSplitsTheShapeAtItsDims) {
  Builder b;
  const int x = b.Input(MIXRT_DTYPE_F32, {2, 3, 5});
  const int y = b.Value(MIXRT_DTYPE_F32, {2, 3, 5});
  const int s = b.Value(MIXRT_DTYPE_F32, {2, 1, 5}, MIXRT_FUSION_VALUE_OUTPUT);
  b.Node(MIXRT_OP_UNARY, Kind(MIXRT_UNARY_RELU), {x}, {y});
  b.Node(MIXRT_OP_REDUCE, Reduce(MIXRT_REDUCE_MEAN, 2u), {y}, {s});
  auto p = sdk::BuildLoopProgram(b.g, {0, 0}, 0);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->split.outer, 2);
  EXPECT_EQ(p->split.middle, 3);
  EXPECT_EQ(p->split.inner, 5);
  ASSERT_EQ(p->reductions.size(), 1u);
  EXPECT_EQ(p->reductions[0].value, s);
  EXPECT_EQ(p->reductions[0].local, p->steps[0].out);
  EXPECT_TRUE(p->stores.empty());  // y only feeds the reduction.
}

TEST(LoopProgram, ReductionsOverDifferentDimsAreRefusedByName) {
  Builder b;
  const int x = b.Input(MIXRT_DTYPE_F32, {4, 6});
  const int y = b.Value(MIXRT_DTYPE_F32, {4, 6});
  const int rows = b.Value(MIXRT_DTYPE_F32, {1, 6}, MIXRT_FUSION_VALUE_OUTPUT);
  const int cols = b.Value(MIXRT_DTYPE_F32, {4, 1}, MIXRT_FUSION_VALUE_OUTPUT);
  b.Node(MIXRT_OP_UNARY, Kind(MIXRT_UNARY_RELU), {x}, {y});
  b.Node(MIXRT_OP_REDUCE, Reduce(MIXRT_REDUCE_SUM, 1u), {y}, {rows});
  b.Node(MIXRT_OP_REDUCE, Reduce(MIXRT_REDUCE_SUM, 2u), {y}, {cols});
  // sdk::ClaimLoops keeps the second reduction out; a plugin's own claim
  // may not, and one iteration shape does not make one loop.
  EXPECT_EQ(cpu::ClaimFusedLoops(b.g), (std::vector<int>{0, 0, -1}));
  const std::vector<int> groups = {0, 0, 0};
  auto p = sdk::BuildLoopProgram(b.g, groups, 0);
  EXPECT_TRUE(absl::IsUnimplemented(p.status())) << p.status();
  EXPECT_THAT(p.status().message(),
              HasSubstr("reductions over different dims"));
  // The interpreter refuses it too (the plan then runs the ops one by one).
  EXPECT_TRUE(
      absl::IsUnimplemented(cpu::CompileFusedLoop(b.g, groups, 0).status()));
}

TEST(LoopProgram, KindsWithoutAStepAreNoLoopNodes) {
  Builder b;
  const int x = b.Input(MIXRT_DTYPE_F32, {8});
  const int e = b.Value(MIXRT_DTYPE_F32, {8}, MIXRT_FUSION_VALUE_OUTPUT);
  b.Node(MIXRT_OP_UNARY, Kind(MIXRT_UNARY_EXP), {x}, {e});
  EXPECT_TRUE(sdk::LoopIterationShape(b.g, b.g.nodes[0]).empty());
  auto kind = sdk::StepKindOf(b.g.nodes[0]);
  EXPECT_TRUE(absl::IsUnimplemented(kind.status()));
  EXPECT_THAT(kind.status().message(), HasSubstr("unary"));
  auto p = sdk::BuildLoopProgram(b.g, {0}, 0);
  EXPECT_TRUE(absl::IsUnimplemented(p.status())) << p.status();
  EXPECT_THAT(p.status().message(), HasSubstr("node 0 (unary)"));
}

TEST(LoopProgram, TheEmitterNamesWhatItCannotPrint) {
  Builder b;
  const int i = b.Input(MIXRT_DTYPE_I64, {8});
  const int j = b.Input(MIXRT_DTYPE_I64, {8});
  const int eq = b.Value(MIXRT_DTYPE_BOOL, {8}, MIXRT_FUSION_VALUE_OUTPUT);
  b.Node(MIXRT_OP_COMPARE, Kind(MIXRT_COMPARE_EQ), {i, j}, {eq});
  auto ints = sdk::GenerateLoopSource(b.g, {0}, 0);
  EXPECT_TRUE(absl::IsUnimplemented(ints.status())) << ints.status();
  EXPECT_THAT(ints.status().message(), HasSubstr("is an integer"));
  EXPECT_TRUE(sdk::BuildLoopProgram(b.g, {0}, 0).ok());  // The interpreter's.

  Builder g;
  const int dy = g.Input(MIXRT_DTYPE_F32, {8});
  const int x = g.Input(MIXRT_DTYPE_F32, {8});
  const int dx = g.Value(MIXRT_DTYPE_F32, {8}, MIXRT_FUSION_VALUE_OUTPUT);
  g.Node(MIXRT_OP_UNARY_BACKWARD, Kind(MIXRT_UNARY_GELU), {dy, x}, {dx});
  auto gelu = sdk::GenerateLoopSource(g.g, {0}, 0);
  EXPECT_TRUE(absl::IsUnimplemented(gelu.status())) << gelu.status();
  EXPECT_THAT(gelu.status().message(), HasSubstr("GELU's gradient"));
  EXPECT_TRUE(sdk::LoopCodegenShape(g.g, g.g.nodes[0]).empty());
  EXPECT_FALSE(sdk::LoopIterationShape(g.g, g.g.nodes[0]).empty());
}

}  // namespace
}  // namespace mixrt
