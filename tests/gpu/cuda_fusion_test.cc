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
using testing::PointwiseChain;

TEST(CudaFusion, TheClaimedGroupCompilesToPtx) {
  PointwiseChain c(64, 70);
  const std::vector<int> groups = cuda::ClaimGeneratedLoops(c.b.g);
  ASSERT_EQ(groups, (std::vector<int>{0, 0, 0, 0, 0}));
  auto ptx = cuda::CompileGeneratedLoop(c.b.g, groups, 0, "compute_90");
  if (absl::IsUnavailable(ptx.status())) GTEST_SKIP() << ptx.status();
  ASSERT_TRUE(ptx.ok()) << ptx.status();
  EXPECT_NE(ptx->ptx.find(absl::StrCat(".entry ", ptx->name)),
            std::string::npos)
      << ptx->ptx;
  EXPECT_EQ(ptx->numel, 64 * 70);
  // Inputs x, bias, s; stored r, mf, gt (a and m stay in registers).
  EXPECT_EQ(ptx->values.size(), 6u);
}

TEST(CudaFusion, ReductionsAreNotClaimed) {
  const Builder b = testing::ReluThenColumnSum();
  EXPECT_EQ(cuda::ClaimGeneratedLoops(b.g), (std::vector<int>{-1, -1}));
}

TEST(CudaFusion, NvrtcErrorsCarryTheLogAndTheFileName) {
  auto bad = cuda::CompileToPtx("this is not CUDA", "broken.cu", "compute_90");
  if (absl::IsUnavailable(bad.status())) GTEST_SKIP() << bad.status();
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("broken.cu"), std::string::npos)
      << bad.status();
}

}  // namespace
}  // namespace mixrt
