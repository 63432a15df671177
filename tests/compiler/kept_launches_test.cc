// KeptLaunches on graphs written by hand: which launches are kept (on
// constants and kept results only, writing temporaries no other node
// writes), and when a kept launch runs again (a source's version changed,
// directly or through a kept result it reads; a failed launch stays due).
// The plan's tests (compile_test, released_weight_copy_test) check the
// same through compiled functions; these name the rule itself.
#include "core/compiler/kept_launches.h"

#include <vector>

#include "absl/status/status.h"
#include "gtest/gtest.h"

namespace mixrt::compiler {
namespace {

StorageSlot Slot(StorageSlot::Kind kind, uint64_t bytes) {
  StorageSlot s;
  s.kind = kind;
  s.bytes = bytes;
  return s;
}

ValueRef Ref(int slot) {
  ValueRef v;
  v.slot = slot;
  return v;
}

GraphNode Launch(MixrtOp op, std::vector<int> inputs,
                 std::vector<int> outputs) {
  GraphNode n;
  n.op = op;
  for (int s : inputs) n.inputs.push_back(Ref(s));
  for (int s : outputs) n.outputs.push_back(Ref(s));
  return n;
}

bool Temporary(const Graph& g, int slot) {
  const StorageSlot& s = g.slots[slot];
  return s.kind == StorageSlot::Kind::kInternal && !s.returned && !s.saved;
}

// Slots: 0 a weight (constant), 1 its cast, 2 the cast's transpose, 3 the
// input, 4 the result, 5 a cast of the weight that is returned, 6 a fill's
// output, 7 a random draw's, 8 written twice.
Graph WeightGraph() {
  Graph g;
  using K = StorageSlot::Kind;
  g.slots = {
      Slot(K::kConstant, 64), Slot(K::kInternal, 32), Slot(K::kInternal, 32),
      Slot(K::kInput, 64),    Slot(K::kInternal, 64), Slot(K::kInternal, 32),
      Slot(K::kInternal, 16), Slot(K::kInternal, 16), Slot(K::kInternal, 16)};
  g.slots[3].input = 0;
  g.slots[4].returned = true;
  g.slots[5].returned = true;
  g.nodes = {
      Launch(MIXRT_OP_COPY, {0}, {1}),           // 0: kept.
      Launch(MIXRT_OP_COPY, {1}, {2}),           // 1: kept (reads a kept one).
      Launch(MIXRT_OP_MATMUL, {3, 2}, {4}),      // 2: reads the input.
      Launch(MIXRT_OP_COPY, {0}, {5}),           // 3: writes a result.
      Launch(MIXRT_OP_FILL, {}, {6}),            // 4: kept (a constant).
      Launch(MIXRT_OP_RANDOM_UNIFORM, {}, {7}),  // 5: a draw, never kept.
      Launch(MIXRT_OP_COPY, {0}, {8}),           // 6 and 7: two writers.
      Launch(MIXRT_OP_COPY, {0}, {8}),
  };
  g.outputs = {Ref(4), Ref(5)};
  return g;
}

TEST(KeptLaunches, KeepsLaunchesOnConstantsWritingTemporariesWrittenOnce) {
  const Graph g = WeightGraph();
  KeptLaunches kept(
      g, [&](int s) { return Temporary(g, s); }, [](int) { return 1u; });
  EXPECT_EQ(kept.count(), 3);
  const std::vector<bool> expected = {true, true,  false, false,
                                      true, false, false, false};
  for (int node = 0; node < 8; ++node) {
    EXPECT_EQ(kept.IsKeptLaunch(node), expected[node]) << "node " << node;
  }
  EXPECT_TRUE(kept.IsKept(1));
  EXPECT_TRUE(kept.IsKept(2));
  EXPECT_FALSE(kept.IsKept(4));
  EXPECT_FALSE(kept.IsKept(5));
  EXPECT_FALSE(kept.IsKept(8));
  EXPECT_EQ(kept.kept_bytes(), 32u + 32u + 16u);
  EXPECT_EQ(kept.released_bytes(), 0u);
  EXPECT_FALSE(kept.Absent(1));
}

TEST(KeptLaunches, RunAgainOnlyWhenASourceVersionChanged) {
  const Graph g = WeightGraph();
  uint64_t weight_version = 7;
  KeptLaunches kept(
      g, [&](int s) { return Temporary(g, s); },
      [&](int) { return weight_version; });
  std::vector<int> runs(g.nodes.size(), 0);
  auto run_all = [&] {
    for (int node : {0, 1, 4}) {
      ASSERT_TRUE(kept.RunIfDue(node,
                                [&] {
                                  ++runs[node];
                                  return absl::OkStatus();
                                })
                      .ok());
    }
  };
  run_all();
  EXPECT_EQ(runs, (std::vector<int>{1, 1, 0, 0, 1, 0, 0, 0}));
  run_all();  // Nothing changed: nothing runs.
  EXPECT_EQ(runs, (std::vector<int>{1, 1, 0, 0, 1, 0, 0, 0}));
  // The weight changed: its cast runs again, and so does the transpose of
  // the cast (its source's version moved); the fill reads nothing.
  ++weight_version;
  run_all();
  EXPECT_EQ(runs, (std::vector<int>{2, 2, 0, 0, 1, 0, 0, 0}));
}

TEST(KeptLaunches, AFailedLaunchStaysDue) {
  const Graph g = WeightGraph();
  KeptLaunches kept(
      g, [&](int s) { return Temporary(g, s); }, [](int) { return 1u; });
  int runs = 0;
  const absl::Status failed = kept.RunIfDue(0, [&] {
    ++runs;
    return absl::InternalError("out of memory");
  });
  EXPECT_EQ(failed.code(), absl::StatusCode::kInternal);
  ASSERT_TRUE(kept.RunIfDue(0,
                            [&] {
                              ++runs;
                              return absl::OkStatus();
                            })
                  .ok());
  EXPECT_EQ(runs, 2);
}

}  // namespace
}  // namespace mixrt::compiler
