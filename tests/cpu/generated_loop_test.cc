// The CPU plugin's generated fused loops (backends/cpu/generated_loop)
// against its fused-loop interpreter, bit for bit (NaN for NaN, whatever
// its sign): pointwise chains with broadcasts and casts, and chains ending
// in column or whole-row reductions (sums, means, maxima, minima; NaN and
// infinities among the values; f32 and bf16 results; several reductions
// in one group; outer dims kept; rows of several pieces). Also
// the cache: an object planted broken is rebuilt, never trusted; and the
// background build (MIXRT_CPU_CODEGEN=async) takes over from the
// interpreter.
#include "backends/cpu/fusion/generated_loop.h"

#include <stdlib.h>

#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <functional>
#include <limits>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "backends/cpu/fusion/fused_loop.h"
#include "backends/cpu/fusion/loop_compiler.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "mixrt/float_convert.h"
#include "plugins/sdk/loop_codegen.h"
#include "tests/testing/fusion_graph_builder.h"

namespace mixrt::cpu {
namespace {

using testing::Builder;
using testing::Kind;
using testing::Reduce;

// Bytes for every value of a graph: inputs filled with values that include
// NaN, infinities and ties for bf16 rounding; outputs zeroed.
struct Buffers {
  std::vector<std::vector<uint8_t>> bytes;
  explicit Buffers(const sdk::FusionGraph& g) {
    for (size_t v = 0; v < g.values.size(); ++v) {
      const sdk::FusionValue& val = g.values[v];
      int64_t extent = 1;  // Elements up to the last one the strides reach.
      for (size_t d = 0; d < val.shape.size(); ++d)
        extent += (val.shape[d] - 1) * val.strides[d];
      const int64_t size = val.dtype == MIXRT_DTYPE_F32    ? 4
                           : val.dtype == MIXRT_DTYPE_BOOL ? 1
                                                           : 2;
      bytes.emplace_back(extent * size, 0);
      if ((val.flags & MIXRT_FUSION_VALUE_INPUT) == 0) continue;
      for (int64_t i = 0; i < extent; ++i) {
        float x = static_cast<float>((i * 37 + v * 11) % 203 - 101) / 7.0f;
        if (i % 97 == 13) x = std::numeric_limits<float>::quiet_NaN();
        if (i % 89 == 5) x = std::numeric_limits<float>::infinity();
        if (i % 83 == 7) x = -std::numeric_limits<float>::infinity();
        if (size == 4) {
          std::memcpy(&bytes[v][i * 4], &x, 4);
        } else {
          const uint16_t b = sdk::F32ToBF16Bits(x);
          std::memcpy(&bytes[v][i * 2], &b, 2);
        }
      }
    }
  }
  std::vector<void*> data() {
    std::vector<void*> d;
    for (auto& b : bytes) d.push_back(b.data());
    return d;
  }
};

// Equal bits, but any NaN for a NaN: which operand's NaN an instruction
// passes on (its sign, its payload) is the compiler's choice.
void ExpectSameValues(const sdk::FusionGraph& g, const Buffers& mine,
                      const Buffers& want) {
  for (size_t v = 0; v < g.values.size(); ++v) {
    const MixrtDtype dtype = g.values[v].dtype;
    const size_t size = dtype == MIXRT_DTYPE_F32    ? 4
                        : dtype == MIXRT_DTYPE_BOOL ? 1
                                                    : 2;
    ASSERT_EQ(mine.bytes[v].size(), want.bytes[v].size());
    for (size_t i = 0; i < mine.bytes[v].size(); i += size) {
      auto as_float = [&](const std::vector<uint8_t>& b) {
        if (size == 1) return static_cast<float>(b[i]);
        if (size == 4) {
          float f;
          std::memcpy(&f, &b[i], 4);
          return f;
        }
        uint16_t h;
        std::memcpy(&h, &b[i], 2);
        return sdk::BF16BitsToF32(h);
      };
      const float a = as_float(mine.bytes[v]), w = as_float(want.bytes[v]);
      if (a != a && w != w) continue;
      ASSERT_EQ(std::memcmp(&mine.bytes[v][i], &want.bytes[v][i], size), 0)
          << "value " << v << " element " << i / size << ": " << a << " vs "
          << w;
    }
  }
}

void UseSyncBuildsIn(const std::string& dir) {
  setenv("MIXRT_CPU_CODEGEN", "sync", 1);
  setenv("MIXRT_CACHE_DIR", dir.c_str(), 1);
}

// Runs group 0 of `b` generated and interpreted; expects equal bytes.
void ExpectGeneratedMatchesInterpreter(
    const Builder& b, const std::vector<int>& groups,
    const std::function<void(Buffers&)>& fill = nullptr) {
  UseSyncBuildsIn(::testing::TempDir());
  auto generated = CompileGeneratedLoop(b.g, groups, 0);
  ASSERT_TRUE(generated.ok()) << generated.status();
  EXPECT_THAT((*generated)->Description(),
              ::testing::EndsWith("(generated C++)"));
  auto interpreter = CompileFusedLoop(b.g, groups, 0);
  ASSERT_TRUE(interpreter.ok()) << interpreter.status();
  Buffers mine(b.g), want(b.g);
  if (fill) {
    fill(mine);
    fill(want);
  }
  const int64_t runs = GeneratedLoopRuns();
  ASSERT_TRUE((*generated)->Run(mine.data(), {}).ok());
  EXPECT_EQ(GeneratedLoopRuns(), runs + 1) << "the interpreter ran instead";
  ASSERT_TRUE((*interpreter)->Run(want.data(), {}).ok());
  ExpectSameValues(b.g, mine, want);
}

TEST(GeneratedLoop, PointwiseChainMatchesTheInterpreter) {
  testing::PointwiseChain c(7, 301);
  ExpectGeneratedMatchesInterpreter(c.b, ClaimFusedLoops(c.b.g));
}

MixrtPointwiseAttrs KindWith(uint32_t kind, double alpha, double beta) {
  MixrtPointwiseAttrs a = Kind(kind);
  a.alpha = alpha;
  a.beta = beta;
  return a;
}

// Every step kind the emitter prints beyond the chain above, each a call
// of its loop_elements.h function in both: pow, min/max, sub/div, abs,
// neg, leaky_relu, GELU, clamp (a NaN bound is no bound) and the
// derivatives of neg, abs, relu, leaky_relu and clamp; where, ne/le, and
// a copy to bool.
TEST(GeneratedLoop, EveryPrintedStepKindMatchesTheInterpreter) {
  const int64_t rows = 3, cols = 257;
  Builder b;
  const int x = b.Input(MIXRT_DTYPE_F32, {rows, cols});
  const int y = b.Input(MIXRT_DTYPE_F32, {rows, cols});
  auto value = [&] {
    return b.Value(MIXRT_DTYPE_F32, {rows, cols}, MIXRT_FUSION_VALUE_OUTPUT);
  };
  auto binary = [&](uint32_t kind, int u, int v) {
    const int out = value();
    b.Node(MIXRT_OP_BINARY, Kind(kind), {u, v}, {out});
    return out;
  };
  auto unary = [&](MixrtOp op, uint32_t kind, std::vector<int> in,
                   double alpha = 0, double beta = 0) {
    const int out = value();
    b.Node(op, KindWith(kind, alpha, beta), std::move(in), {out});
    return out;
  };
  const double nan = std::numeric_limits<double>::quiet_NaN();
  int v = binary(MIXRT_BINARY_POW, x, y);
  v = binary(MIXRT_BINARY_MAXIMUM, v, x);
  v = binary(MIXRT_BINARY_MINIMUM, v, y);
  v = binary(MIXRT_BINARY_SUB, v, x);
  v = binary(MIXRT_BINARY_DIV, v, y);
  v = unary(MIXRT_OP_UNARY, MIXRT_UNARY_ABS, {v});
  v = unary(MIXRT_OP_UNARY, MIXRT_UNARY_NEG, {v});
  v = unary(MIXRT_OP_UNARY, MIXRT_UNARY_LEAKY_RELU, {v}, 0.01);
  v = unary(MIXRT_OP_UNARY, MIXRT_UNARY_GELU, {v});
  v = unary(MIXRT_OP_UNARY, MIXRT_UNARY_CLAMP, {v}, -2.5, nan);
  v = unary(MIXRT_OP_UNARY, MIXRT_UNARY_CLAMP, {v}, -1.0, 3.0);
  for (MixrtUnaryKind kind : {MIXRT_UNARY_NEG, MIXRT_UNARY_ABS,
                              MIXRT_UNARY_RELU, MIXRT_UNARY_LEAKY_RELU}) {
    v = unary(MIXRT_OP_UNARY_BACKWARD, kind, {v, x}, 0.2);
  }
  v = unary(MIXRT_OP_UNARY_BACKWARD, MIXRT_UNARY_CLAMP, {v, y}, -1.0, 2.0);
  const int ne = b.Value(MIXRT_DTYPE_BOOL, {rows, cols});
  b.Node(MIXRT_OP_COMPARE, Kind(MIXRT_COMPARE_NE), {v, x}, {ne});
  const int le =
      b.Value(MIXRT_DTYPE_BOOL, {rows, cols}, MIXRT_FUSION_VALUE_OUTPUT);
  b.Node(MIXRT_OP_COMPARE, Kind(MIXRT_COMPARE_LE), {v, y}, {le});
  const int picked = value();
  b.NoAttrs(MIXRT_OP_WHERE, {ne, v, y}, {picked});
  const int nonzero =
      b.Value(MIXRT_DTYPE_BOOL, {rows, cols}, MIXRT_FUSION_VALUE_OUTPUT);
  b.NoAttrs(MIXRT_OP_COPY, {picked}, {nonzero});
  const std::vector<int> groups = ClaimFusedLoops(b.g);
  for (size_t n = 0; n < groups.size(); ++n)
    ASSERT_EQ(groups[n], 0) << "node " << n << " left out of the loop";
  ExpectGeneratedMatchesInterpreter(b, groups);
}

TEST(GeneratedLoop, ColumnReductionsMatchTheInterpreter) {
  // [3, 40, 300]: outer 3 kept, the 40 rows reduced, 300 columns (a block
  // of 256 and a ragged one). A bf16 relu-backward times a broadcast
  // scale, cast to f32, and four reductions.
  Builder b;
  const int g = b.Input(MIXRT_DTYPE_BF16, {3, 40, 300});
  const int x = b.Input(MIXRT_DTYPE_BF16, {3, 40, 300});
  const int s = b.Input(MIXRT_DTYPE_BF16, {3, 40, 300}, {0, 0, 1});
  const int gx = b.Value(MIXRT_DTYPE_BF16, {3, 40, 300});
  const int m = b.Value(MIXRT_DTYPE_BF16, {3, 40, 300});
  const int scaled =
      b.Value(MIXRT_DTYPE_F32, {3, 40, 300}, MIXRT_FUSION_VALUE_OUTPUT);
  const int sum =
      b.Value(MIXRT_DTYPE_F32, {3, 1, 300}, MIXRT_FUSION_VALUE_OUTPUT);
  const int mean =
      b.Value(MIXRT_DTYPE_BF16, {3, 1, 300}, MIXRT_FUSION_VALUE_OUTPUT);
  const int max =
      b.Value(MIXRT_DTYPE_F32, {3, 1, 300}, MIXRT_FUSION_VALUE_OUTPUT);
  const int min =
      b.Value(MIXRT_DTYPE_F32, {3, 1, 300}, MIXRT_FUSION_VALUE_OUTPUT);
  b.Node(MIXRT_OP_UNARY_BACKWARD, Kind(MIXRT_UNARY_RELU), {g, x}, {gx});
  b.Node(MIXRT_OP_BINARY, Kind(MIXRT_BINARY_MUL), {gx, s}, {m});
  b.NoAttrs(MIXRT_OP_COPY, {m}, {scaled});
  b.Node(MIXRT_OP_REDUCE, Reduce(MIXRT_REDUCE_SUM, 2u), {scaled}, {sum});
  b.Node(MIXRT_OP_REDUCE, Reduce(MIXRT_REDUCE_MEAN, 2u), {gx}, {mean});
  b.Node(MIXRT_OP_REDUCE, Reduce(MIXRT_REDUCE_MAX, 2u), {scaled}, {max});
  b.Node(MIXRT_OP_REDUCE, Reduce(MIXRT_REDUCE_MIN, 2u), {scaled}, {min});
  ExpectGeneratedMatchesInterpreter(b, {0, 0, 0, 0, 0, 0, 0});
}

TEST(GeneratedLoop, WholeRowReductionsMatchTheInterpreter) {
  // [40, 50]: rows of 50 (one ragged chunk each), reduced over the
  // innermost dim; some rows hold NaN or infinities. A bf16 difference
  // squared in f32, as a loss's, then its sum, mean, maximum and minimum.
  Builder b;
  const int x = b.Input(MIXRT_DTYPE_BF16, {40, 50});
  const int t = b.Input(MIXRT_DTYPE_BF16, {40, 50});
  const int d = b.Value(MIXRT_DTYPE_BF16, {40, 50});
  const int df = b.Value(MIXRT_DTYPE_F32, {40, 50});
  const int sq = b.Value(MIXRT_DTYPE_F32, {40, 50});
  const int sum = b.Value(MIXRT_DTYPE_F32, {40, 1}, MIXRT_FUSION_VALUE_OUTPUT);
  const int mean =
      b.Value(MIXRT_DTYPE_BF16, {40, 1}, MIXRT_FUSION_VALUE_OUTPUT);
  const int max = b.Value(MIXRT_DTYPE_F32, {40, 1}, MIXRT_FUSION_VALUE_OUTPUT);
  const int min = b.Value(MIXRT_DTYPE_F32, {40, 1}, MIXRT_FUSION_VALUE_OUTPUT);
  b.Node(MIXRT_OP_BINARY, Kind(MIXRT_BINARY_SUB), {x, t}, {d});
  b.NoAttrs(MIXRT_OP_COPY, {d}, {df});
  b.Node(MIXRT_OP_BINARY, Kind(MIXRT_BINARY_MUL), {df, df}, {sq});
  b.Node(MIXRT_OP_REDUCE, Reduce(MIXRT_REDUCE_SUM, 2u), {sq}, {sum});
  b.Node(MIXRT_OP_REDUCE, Reduce(MIXRT_REDUCE_MEAN, 2u), {sq}, {mean});
  b.Node(MIXRT_OP_REDUCE, Reduce(MIXRT_REDUCE_MAX, 2u), {d}, {max});
  b.Node(MIXRT_OP_REDUCE, Reduce(MIXRT_REDUCE_MIN, 2u), {d}, {min});
  ExpectGeneratedMatchesInterpreter(b, {0, 0, 0, 0, 0, 0, 0});
}

// f32 value `v` as rows of `row` elements whose exact sum is 0.75 but
// whose running sums reach 2^60: the second half of each row negates the
// first, mirrored, around 0.75. A sum in double is then mostly its rounding
// errors, and adding in any other order (other pieces, chunks, lanes, or
// the pieces combined otherwise) gives another float.
std::function<void(Buffers&)> Cancelling(int v, int64_t row) {
  return [v, row](Buffers& buffers) {
    float* x = reinterpret_cast<float*>(buffers.bytes[v].data());
    const int64_t n = static_cast<int64_t>(buffers.bytes[v].size() / 4);
    for (int64_t r = 0; r < n / row; ++r) {
      float* y = x + r * row;
      for (int64_t i = 0; i < row / 2; ++i) {
        const float m = 1.0f + static_cast<float>((i * 37) % 101) / 101.0f;
        y[i] = std::ldexp(i % 3 == 0 ? -m : m,
                          static_cast<int>((i * 13) % 41) + 20);
        y[row - 1 - i] = -y[i];
      }
      y[row / 2] = 0.75f;
    }
  };
}

TEST(GeneratedLoop, WholeRowSumsOverManyPiecesMatchTheInterpreter) {
  // Two rows of 150001: three pieces of 2^16 each, the last ragged, and a
  // ragged last chunk, added in the interpreter's order. Then the mean of
  // all of them, as a loss's, over a [2, 150001] view.
  for (const auto& [kind, axes] :
       {std::pair{MIXRT_REDUCE_SUM, 2u}, {MIXRT_REDUCE_MEAN, 3u}}) {
    Builder b;
    const int x = b.Input(MIXRT_DTYPE_F32, {2, 150001});
    const int y = b.Value(MIXRT_DTYPE_F32, {2, 150001});
    const int r = b.Value(MIXRT_DTYPE_F32, {axes == 3u ? 1 : 2, 1},
                          MIXRT_FUSION_VALUE_OUTPUT);
    b.Node(MIXRT_OP_UNARY, Kind(MIXRT_UNARY_NEG), {x}, {y});
    b.Node(MIXRT_OP_REDUCE, Reduce(kind, axes), {y}, {r});
    ExpectGeneratedMatchesInterpreter(b, {0, 0}, Cancelling(x, 150001));
  }
}

TEST(GeneratedLoop, ABrokenCachedObjectIsRebuilt) {
  const std::string dir = ::testing::TempDir() + "/broken_cache";
  UseSyncBuildsIn(dir);
  testing::PointwiseChain c(5, 77);
  const std::vector<int> groups = ClaimFusedLoops(c.b.g);
  auto source = sdk::GenerateLoopSource(c.b.g, groups, 0);
  ASSERT_TRUE(source.ok());
  const std::string path = CachedLoopPath(source->source, source->name);
  std::ofstream(path) << "not an object file";
  EXPECT_EQ(LoadCachedLoop(source->source, source->name), nullptr);
  std::ofstream(path) << "not an object file";
  ExpectGeneratedMatchesInterpreter(c.b, groups);
  std::ifstream built(path);
  std::string magic(4, '\0');
  built.read(magic.data(), 4);
  EXPECT_EQ(magic,
            "\x7f"
            "ELF")
      << path << " was not rebuilt";
}

TEST(GeneratedLoop, TheBackgroundBuildTakesOver) {
  setenv("MIXRT_CPU_CODEGEN", "async", 1);
  setenv("MIXRT_CACHE_DIR", (::testing::TempDir() + "/async_cache").c_str(), 1);
  testing::PointwiseChain c(9, 123);
  const std::vector<int> groups = ClaimFusedLoops(c.b.g);
  auto k = CompileGeneratedLoop(c.b.g, groups, 0);
  ASSERT_TRUE(k.ok()) << k.status();
  EXPECT_THAT((*k)->Description(),
              ::testing::HasSubstr("built in the background"));
  auto interpreter = CompileFusedLoop(c.b.g, groups, 0);
  ASSERT_TRUE(interpreter.ok());
  Buffers want(c.b.g);
  ASSERT_TRUE((*interpreter)->Run(want.data(), {}).ok());
  const int64_t runs = GeneratedLoopRuns();
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (GeneratedLoopRuns() == runs) {
    ASSERT_LT(std::chrono::steady_clock::now(), deadline)
        << "the build never took over";
    Buffers mine(c.b.g);
    ASSERT_TRUE((*k)->Run(mine.data(), {}).ok());
    ExpectSameValues(c.b.g, mine, want);
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

TEST(GeneratedLoop, AnUnknownModeIsAnError) {
  setenv("MIXRT_CPU_CODEGEN", "fast", 1);
  testing::PointwiseChain c(2, 3);
  auto k = CompileGeneratedLoop(c.b.g, ClaimFusedLoops(c.b.g), 0);
  ASSERT_FALSE(k.ok());
  EXPECT_THAT(
      k.status().message(),
      ::testing::HasSubstr("expected sync (the default), async or off"));
  unsetenv("MIXRT_CPU_CODEGEN");
}

}  // namespace
}  // namespace mixrt::cpu
