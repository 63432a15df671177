// Without a C++ compiler (CXX names none) the CPU plugin's fused loops run
// on the interpreter, say so in their description, and still give the
// interpreter's results. Its own process: the compiler is probed once.
#include <stdlib.h>

#include <cstring>
#include <vector>

#include "backends/cpu/fusion/fused_loop.h"
#include "backends/cpu/fusion/generated_loop.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/fusion_graph_builder.h"

namespace mixrt::cpu {
namespace {

TEST(GeneratedLoop, WithoutACompilerTheInterpreterRuns) {
  setenv("CXX", "/nonexistent/c++", 1);
  setenv("MIXRT_CPU_CODEGEN", "sync", 1);
  setenv("MIXRT_CACHE_DIR", ::testing::TempDir().c_str(), 1);
  testing::PointwiseChain c(3, 50);
  const std::vector<int> groups = ClaimFusedLoops(c.b.g);
  auto k = CompileGeneratedLoop(c.b.g, groups, 0);
  ASSERT_TRUE(k.ok()) << k.status();
  EXPECT_THAT((*k)->Description(),
              ::testing::HasSubstr(
                  "(interpreted: no C++ compiler: '/nonexistent/c++ --version' "
                  "did not run (set CXX to one))"));
  std::vector<uint16_t> x(150, 0x3f80), bias(50, 0x4000), r(150), r_want(150);
  uint16_t s = 0x3fc0;
  std::vector<float> mf(150), mf_want(150);
  std::vector<uint8_t> gt(150), gt_want(150);
  auto data = [&](uint16_t* r_out, float* mf_out, uint8_t* gt_out) {
    std::vector<void*> d(c.b.g.values.size(), nullptr);
    d[c.x] = x.data();
    d[c.bias] = bias.data();
    d[c.s] = &s;
    d[c.r] = r_out;
    d[c.mf] = mf_out;
    d[c.gt] = gt_out;
    return d;
  };
  const int64_t runs = GeneratedLoopRuns();
  ASSERT_TRUE((*k)->Run(data(r.data(), mf.data(), gt.data()), {}).ok());
  EXPECT_EQ(GeneratedLoopRuns(), runs);
  auto interpreter = CompileFusedLoop(c.b.g, groups, 0);
  ASSERT_TRUE(interpreter.ok());
  ASSERT_TRUE((*interpreter)
                  ->Run(data(r_want.data(), mf_want.data(), gt_want.data()), {})
                  .ok());
  EXPECT_EQ(r, r_want);
  EXPECT_EQ(mf, mf_want);
  EXPECT_EQ(gt, gt_want);
  EXPECT_EQ(r[0], 0x4090) << "(1 + 2) * 1.5 = 4.5 in bf16";
}

}  // namespace
}  // namespace mixrt::cpu
