// The CUDA plugin's fusion up to loading the PTX: its claim of a graph
// and the group's generated source compiled by NVRTC for sm_90 (NVRTC
// needs no GPU; running the kernel waits for one).
#include "backends/cuda/cuda_fusion.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "backends/cuda/nvrtc_program.h"
#include "gtest/gtest.h"
#include "tests/testing/fusion_graph_builder.h"

namespace mixrt {
namespace {

using testing::Builder;
using testing::Kind;

// bf16: y = relu((x + bias) * scale), z = where(y > x, y, -x) in f32 ...
// here as: a = x + bias (broadcast row), m = a * s (broadcast scalar),
// r = relu(m), out = r stored bf16; plus an f32 copy of m with a compare.
struct Chain {
  Builder b;
  int x, bias, s, a, m, r, mf, gt;
  explicit Chain(int64_t rows, int64_t cols) {
    x = b.Input(MIXRT_DTYPE_BF16, {rows, cols});
    bias = b.Input(MIXRT_DTYPE_BF16, {rows, cols}, {0, 1});
    s = b.Input(MIXRT_DTYPE_BF16, {rows, cols}, {0, 0});
    a = b.Value(MIXRT_DTYPE_BF16, {rows, cols});
    m = b.Value(MIXRT_DTYPE_BF16, {rows, cols});
    r = b.Value(MIXRT_DTYPE_BF16, {rows, cols}, MIXRT_FUSION_VALUE_OUTPUT);
    mf = b.Value(MIXRT_DTYPE_F32, {rows, cols}, MIXRT_FUSION_VALUE_OUTPUT);
    gt = b.Value(MIXRT_DTYPE_BOOL, {rows, cols}, MIXRT_FUSION_VALUE_OUTPUT);
    b.Node(MIXRT_OP_BINARY, Kind(MIXRT_BINARY_ADD), {x, bias}, {a});
    b.Node(MIXRT_OP_BINARY, Kind(MIXRT_BINARY_MUL), {a, s}, {m});
    b.Node(MIXRT_OP_UNARY, Kind(MIXRT_UNARY_RELU), {m}, {r});
    b.NoAttrs(MIXRT_OP_COPY, {m}, {mf});
    b.Node(MIXRT_OP_COMPARE, Kind(MIXRT_COMPARE_GT), {r, x}, {gt});
  }
};

TEST(CudaFusion, TheClaimedGroupCompilesToPtx) {
  Chain c(64, 70);
  const std::vector<int> groups = cuda::ClaimGeneratedLoops(c.b.g);
  ASSERT_EQ(groups, (std::vector<int>{0, 0, 0, 0, 0}));
  auto ptx = cuda::CompileGeneratedLoop(c.b.g, groups, 0, "compute_90");
  if (absl::IsUnavailable(ptx.status())) GTEST_SKIP() << ptx.status();
  ASSERT_TRUE(ptx.ok()) << ptx.status();
  EXPECT_NE(ptx->ptx.find(absl::StrCat(".entry ", ptx->name)), std::string::npos) << ptx->ptx;
  EXPECT_EQ(ptx->numel, 64 * 70);
  // Inputs x, bias, s; stored r, mf, gt (a and m stay in registers).
  EXPECT_EQ(ptx->values.size(), 6u);
}

TEST(CudaFusion, ReductionsAreNotClaimed) {
  Builder b;
  const int x = b.Input(MIXRT_DTYPE_F32, {4, 4});
  const int y = b.Value(MIXRT_DTYPE_F32, {4, 4});
  const int s = b.Value(MIXRT_DTYPE_F32, {1, 4}, MIXRT_FUSION_VALUE_OUTPUT);
  b.Node(MIXRT_OP_UNARY, Kind(MIXRT_UNARY_RELU), {x}, {y});
  b.Node(MIXRT_OP_REDUCE, testing::Reduce(MIXRT_REDUCE_SUM, 1u), {y}, {s});
  EXPECT_EQ(cuda::ClaimGeneratedLoops(b.g), (std::vector<int>{-1, -1}));
}

TEST(CudaFusion, NvrtcErrorsCarryTheLogAndTheFileName) {
  auto bad = cuda::CompileToPtx("this is not CUDA", "broken.cu", "compute_90");
  if (absl::IsUnavailable(bad.status())) GTEST_SKIP() << bad.status();
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("broken.cu"), std::string::npos) << bad.status();
}

}  // namespace
}  // namespace mixrt
