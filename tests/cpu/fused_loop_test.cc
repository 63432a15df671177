// The CPU plugin's fused loops against values computed here element by
// element in double (the op definitions of plugin_api.h), and its claims
// against the dependences of the graph: a loop never waits for itself.
#include "backends/cpu/fusion/fused_loop.h"

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "gtest/gtest.h"
#include "mixrt/float_convert.h"
#include "plugins/sdk/plugin.h"
#include "tests/testing/fusion_graph_builder.h"

namespace mixrt::cpu {
namespace {

using sdk::FusionGraph;
using testing::Builder;
using testing::Kind;
using testing::Reduce;

std::vector<float> Floats(int64_t n, uint32_t seed) {
  std::vector<float> v(n);
  uint32_t s = seed;
  for (auto& x : v) {
    s = s * 1664525u + 1013904223u;
    x = static_cast<float>(static_cast<int32_t>(s >> 8) % 2001 - 1000) / 97.0f;
  }
  return v;
}

// y = g * (x > 0), s = column sums of y; a matmul (not a loop op) reads y
// between the two, which must not stop the sum joining the loop.
TEST(CpuFusedLoop, ReluGradientAndItsColumnSumInOneLoopMatchOpByOp) {
  const int64_t rows = 33, cols = 70;  // Odd: partial chunks everywhere.
  Builder b;
  const int g = b.Input(MIXRT_DTYPE_F32, {rows, cols});
  const int x = b.Input(MIXRT_DTYPE_F32, {rows, cols});
  const int w = b.Input(MIXRT_DTYPE_F32, {cols, 8});
  const int y = b.Value(MIXRT_DTYPE_F32, {rows, cols});
  const int z = b.Value(MIXRT_DTYPE_F32, {rows, 8}, MIXRT_FUSION_VALUE_OUTPUT);
  const int s = b.Value(MIXRT_DTYPE_F32, {1, cols}, MIXRT_FUSION_VALUE_OUTPUT);
  b.Node(MIXRT_OP_UNARY_BACKWARD, Kind(MIXRT_UNARY_RELU), {g, x}, {y});
  MixrtMatmulAttrs mm{};
  b.Node(MIXRT_OP_MATMUL, mm, {y, w}, {z});
  b.Node(MIXRT_OP_REDUCE, Reduce(MIXRT_REDUCE_SUM, 1u), {y}, {s});
  const std::vector<int> groups = ClaimFusedLoops(b.g);
  EXPECT_EQ(groups, (std::vector<int>{0, -1, 0}));
  // y is read by the matmul: the loop stores it.
  EXPECT_EQ(b.g.GroupStores(groups, 0), (std::vector<int>{y, s}));
  auto kernel = CompileFusedLoop(b.g, groups, 0);
  ASSERT_TRUE(kernel.ok()) << kernel.status();
  EXPECT_EQ((*kernel)->Description(), "fused loop: unary_backward, reduce");

  std::vector<float> gv = Floats(rows * cols, 1), xv = Floats(rows * cols, 2);
  gv[5] = std::numeric_limits<float>::quiet_NaN();  // At x <= 0: NaN stays.
  xv[5] = -1.0f;
  gv[7] = std::numeric_limits<float>::infinity();  // inf * 0: NaN.
  xv[7] = 0.0f;
  std::vector<float> yv(rows * cols, -7.0f), sv(cols, -7.0f);
  std::vector<void*> data(b.g.values.size(), nullptr);
  data[g] = gv.data();
  data[x] = xv.data();
  data[y] = yv.data();
  data[s] = sv.data();
  ASSERT_TRUE((*kernel)->Run(data, {}).ok());
  for (int64_t i = 0; i < rows * cols; ++i) {
    const float want = gv[i] * (xv[i] > 0.0f ? 1.0f : 0.0f);
    if (std::isnan(want)) {
      EXPECT_TRUE(std::isnan(yv[i])) << i;
    } else {
      EXPECT_EQ(yv[i], want) << i;
    }
  }
  EXPECT_TRUE(std::isnan(yv[5]));
  EXPECT_TRUE(std::isnan(yv[7]));
  for (int64_t c = 0; c < cols; ++c) {
    double sum = 0;  // The reduce kernel's order: rows in turn, in double.
    for (int64_t r = 0; r < rows; ++r) {
      sum += static_cast<double>(gv[r * cols + c]) *
             (xv[r * cols + c] > 0 ? 1 : 0);
    }
    if (std::isnan(sum)) {
      EXPECT_TRUE(std::isnan(sv[c])) << c;
    } else {
      EXPECT_EQ(sv[c], static_cast<float>(sum)) << c;
    }
  }
}

// A broadcast bias and a scalar feed a bf16 chain: each op's result is
// rounded to bf16 before the next reads it, as in memory op by op; the
// mean of the chain's last value over everything ends it.
TEST(CpuFusedLoop, Bf16ChainWithBroadcastsRoundsEachResultLikeMemory) {
  const int64_t rows = 5, cols = 300;  // A row longer than one chunk.
  Builder b;
  const int x = b.Input(MIXRT_DTYPE_BF16, {rows, cols});
  const int bias = b.Input(MIXRT_DTYPE_BF16, {rows, cols}, {0, 1});
  const int scale = b.Input(MIXRT_DTYPE_BF16, {rows, cols}, {0, 0});
  const int a = b.Value(MIXRT_DTYPE_BF16, {rows, cols});
  const int m =
      b.Value(MIXRT_DTYPE_BF16, {rows, cols}, MIXRT_FUSION_VALUE_OUTPUT);
  const int mean = b.Value(MIXRT_DTYPE_F32, {1, 1}, MIXRT_FUSION_VALUE_OUTPUT);
  b.Node(MIXRT_OP_BINARY, Kind(MIXRT_BINARY_ADD), {x, bias}, {a});
  b.Node(MIXRT_OP_BINARY, Kind(MIXRT_BINARY_MUL), {a, scale}, {m});
  b.Node(MIXRT_OP_REDUCE, Reduce(MIXRT_REDUCE_MEAN, 3u), {m}, {mean});
  const std::vector<int> groups = ClaimFusedLoops(b.g);
  ASSERT_EQ(groups, (std::vector<int>{0, 0, 0}));
  auto kernel = CompileFusedLoop(b.g, groups, 0);
  ASSERT_TRUE(kernel.ok()) << kernel.status();

  auto to_bf16 = [](float f) { return sdk::F32ToBF16Bits(f); };
  auto from_bf16 = [](uint16_t h) { return sdk::BF16BitsToF32(h); };
  const std::vector<float> xf = Floats(rows * cols, 3), bf = Floats(cols, 4);
  std::vector<uint16_t> xv, bv;
  for (float f : xf) xv.push_back(to_bf16(f));
  for (float f : bf) bv.push_back(to_bf16(f));
  const uint16_t sv = to_bf16(1.0f / 3.0f);
  std::vector<uint16_t> mv(rows * cols);
  float meanv = -1;
  std::vector<void*> data(b.g.values.size(), nullptr);
  data[x] = xv.data();
  data[bias] = bv.data();
  data[scale] = const_cast<uint16_t*>(&sv);
  data[m] = mv.data();
  data[mean] = &meanv;
  ASSERT_TRUE((*kernel)->Run(data, {}).ok());
  double sum = 0;
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) {
      const float added =
          from_bf16(to_bf16(from_bf16(xv[r * cols + c]) + from_bf16(bv[c])));
      const float want = from_bf16(to_bf16(added * from_bf16(sv)));
      ASSERT_EQ(from_bf16(mv[r * cols + c]), want) << r << "," << c;
      sum += want;
    }
  }
  // Summed in another order than here: within f32's rounding of the mean.
  EXPECT_NEAR(meanv, sum / (rows * cols),
              1e-6 * std::fabs(sum / (rows * cols)) + 1e-7);
}

// A loss's mean over rows longer than the reduce kernel's 2^16-element
// pieces (several per row, the last one partial), with the difference it
// saves for the backward: each row's pieces are summed by whichever thread
// and added in order, so every row is its exact mean within f32's rounding
// (a piece dropped or added twice is off by a quarter of the row).
TEST(CpuFusedLoop, WholeRowMeansOverManyPiecesMatchTheExactMean) {
  const int64_t rows = 3, cols = 200001;
  Builder b;
  const int x = b.Input(MIXRT_DTYPE_F32, {rows, cols});
  const int t = b.Input(MIXRT_DTYPE_F32, {rows, cols});
  const int d =
      b.Value(MIXRT_DTYPE_F32, {rows, cols}, MIXRT_FUSION_VALUE_OUTPUT);
  const int sq = b.Value(MIXRT_DTYPE_F32, {rows, cols});
  const int mean =
      b.Value(MIXRT_DTYPE_F32, {rows, 1}, MIXRT_FUSION_VALUE_OUTPUT);
  b.Node(MIXRT_OP_BINARY, Kind(MIXRT_BINARY_SUB), {x, t}, {d});
  b.Node(MIXRT_OP_BINARY, Kind(MIXRT_BINARY_MUL), {d, d}, {sq});
  b.Node(MIXRT_OP_REDUCE, Reduce(MIXRT_REDUCE_MEAN, 2u), {sq}, {mean});
  const std::vector<int> groups = ClaimFusedLoops(b.g);
  ASSERT_EQ(groups, (std::vector<int>{0, 0, 0}));
  auto kernel = CompileFusedLoop(b.g, groups, 0);
  ASSERT_TRUE(kernel.ok()) << kernel.status();
  const std::vector<float> xv = Floats(rows * cols, 5),
                           tv = Floats(rows * cols, 6);
  std::vector<float> dv(rows * cols), mv(rows, -1.0f);
  std::vector<void*> data(b.g.values.size(), nullptr);
  data[x] = const_cast<float*>(xv.data());
  data[t] = const_cast<float*>(tv.data());
  data[d] = dv.data();
  data[mean] = mv.data();
  ASSERT_TRUE((*kernel)->Run(data, {}).ok());
  for (int64_t r = 0; r < rows; ++r) {
    long double sum = 0;
    for (int64_t c = 0; c < cols; ++c) {
      const float diff = xv[r * cols + c] - tv[r * cols + c];
      ASSERT_EQ(dv[r * cols + c], diff) << r << "," << c;
      sum += static_cast<long double>(
          diff * diff);  // The f32 square, as the op rounds it.
    }
    const double exact = static_cast<double>(sum / cols);
    // The double accumulation's error is far below f32's half ulp of the
    // result.
    EXPECT_NEAR(mv[r], exact, std::ldexp(std::fabs(exact), -23)) << "row " << r;
  }
}

// The mean cross entropy's count of targets: compare of integer labels,
// a cast to f32 and a sum, labels beyond 2^24 compared exactly.
TEST(CpuFusedLoop, IntegerCompareCastAndSumCountExactly) {
  const int64_t n = 1000;
  Builder b;
  const int labels = b.Input(MIXRT_DTYPE_I64, {n});
  const int ignore = b.Input(MIXRT_DTYPE_I64, {n}, {0});
  const int keep = b.Value(MIXRT_DTYPE_BOOL, {n});
  const int as_float = b.Value(MIXRT_DTYPE_F32, {n});
  const int count = b.Value(MIXRT_DTYPE_F32, {1}, MIXRT_FUSION_VALUE_OUTPUT);
  b.Node(MIXRT_OP_COMPARE, Kind(MIXRT_COMPARE_NE), {labels, ignore}, {keep});
  b.NoAttrs(MIXRT_OP_COPY, {keep}, {as_float});
  b.Node(MIXRT_OP_REDUCE, Reduce(MIXRT_REDUCE_SUM, 1u), {as_float}, {count});
  const std::vector<int> groups = ClaimFusedLoops(b.g);
  ASSERT_EQ(groups, (std::vector<int>{0, 0, 0}));
  // Only the count leaves the loop.
  EXPECT_EQ(b.g.GroupStores(groups, 0), (std::vector<int>{count}));
  auto kernel = CompileFusedLoop(b.g, groups, 0);
  ASSERT_TRUE(kernel.ok()) << kernel.status();
  std::vector<int64_t> lv(n);
  int64_t want = 0;
  const int64_t ignored = (int64_t{1} << 40) + 1;
  for (int64_t i = 0; i < n; ++i) {
    // Neighbours of the ignored label, equal to it as floats.
    lv[i] = i % 3 == 0 ? ignored : ignored + 1 + (i % 2);
    want += lv[i] != ignored;
  }
  float got = -1;
  std::vector<void*> data(b.g.values.size(), nullptr);
  data[labels] = lv.data();
  data[ignore] = const_cast<int64_t*>(&ignored);
  data[count] = &got;
  ASSERT_TRUE((*kernel)->Run(data, {}).ok());
  EXPECT_EQ(got, static_cast<float>(want));
}

// c = a + m where m = matmul(a): c may not join a's loop (the loop would
// have to run before and after the matmul); a reduction ends a chain.
TEST(CpuFusedLoop, ClaimsNeverMakeALoopWaitForItself) {
  Builder b;
  const int x = b.Input(MIXRT_DTYPE_F32, {4, 4});
  const int w = b.Input(MIXRT_DTYPE_F32, {4, 4});
  const int a = b.Value(MIXRT_DTYPE_F32, {4, 4});
  const int a2 = b.Value(MIXRT_DTYPE_F32, {4, 4});
  const int m = b.Value(MIXRT_DTYPE_F32, {4, 4});
  const int c = b.Value(MIXRT_DTYPE_F32, {4, 4});
  const int d = b.Value(MIXRT_DTYPE_F32, {4, 4}, MIXRT_FUSION_VALUE_OUTPUT);
  b.Node(MIXRT_OP_UNARY, Kind(MIXRT_UNARY_RELU), {x}, {a});
  b.Node(MIXRT_OP_UNARY, Kind(MIXRT_UNARY_NEG), {a}, {a2});
  MixrtMatmulAttrs mm{};
  b.Node(MIXRT_OP_MATMUL, mm, {a, w}, {m});
  b.Node(MIXRT_OP_BINARY, Kind(MIXRT_BINARY_ADD), {a2, m}, {c});
  b.Node(MIXRT_OP_UNARY, Kind(MIXRT_UNARY_ABS), {c}, {d});
  const std::vector<int> groups = ClaimFusedLoops(b.g);
  EXPECT_EQ(groups[0], groups[1]);
  EXPECT_GE(groups[0], 0);
  EXPECT_EQ(groups[2], -1);
  EXPECT_NE(groups[3], groups[0]);
  EXPECT_EQ(groups[3], groups[4]);
  EXPECT_GE(groups[3], 0);
}

}  // namespace
}  // namespace mixrt::cpu
