// Generated fused-loop source (plugins/sdk/loop_codegen): compiled by the
// system C++ compiler and run, it gives what the CPU plugin's fused loop
// gives, bit for bit (each op rounded to its dtype as in memory); the same
// text compiles with NVRTC to PTX (tests/gpu/cuda_fusion_test).
#include "plugins/sdk/loop_codegen.h"

#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "backends/cpu/fusion/fused_loop.h"
#include "gtest/gtest.h"
#include "mixrt/float_convert.h"
#include "tests/testing/fusion_graph_builder.h"

namespace mixrt {
namespace {

using testing::Builder;
using testing::Kind;
using testing::PointwiseChain;

std::string Compiler() {
  const char* cxx = std::getenv("CXX");
  return cxx != nullptr ? cxx : "c++";
}

TEST(LoopCodegen, HostBuildMatchesTheFusedLoopBitForBit) {
  const int64_t rows = 7, cols = 301;
  PointwiseChain c(rows, cols);
  const std::vector<int> groups = cpu::ClaimFusedLoops(c.b.g);
  ASSERT_EQ(groups, (std::vector<int>{0, 0, 0, 0, 0}));
  auto src = sdk::GenerateLoopSource(c.b.g, groups, 0);
  ASSERT_TRUE(src.ok()) << src.status();
  EXPECT_EQ(src->numel, rows * cols);

  const std::string dir = ::testing::TempDir();
  const std::string cc = absl::StrCat(dir, "/", src->name, ".cc");
  const std::string so = absl::StrCat(dir, "/", src->name, ".so");
  std::ofstream(cc) << src->source;
  const std::string cmd = absl::StrCat(
      Compiler(), " -std=c++20 -O2 -shared -fPIC -o ", so, " ", cc, " 2>&1");
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd << "\n" << src->source;
  void* lib = dlopen(so.c_str(), RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(lib, nullptr) << dlerror();
  using Entry = void (*)(void* const*, long long, long long);
  auto run = reinterpret_cast<Entry>(dlsym(lib, (src->name + "_host").c_str()));
  ASSERT_NE(run, nullptr);

  // Inputs with NaN, infinities and values that round differently in bf16.
  std::vector<uint16_t> x(rows * cols), bias(cols);
  for (int64_t i = 0; i < rows * cols; ++i) {
    x[i] = sdk::F32ToBF16Bits(static_cast<float>((i * 37) % 201 - 100) / 7.0f);
  }
  for (int64_t i = 0; i < cols; ++i)
    bias[i] = sdk::F32ToBF16Bits(static_cast<float>(i % 13) / 3.0f);
  x[3] = sdk::F32ToBF16Bits(std::numeric_limits<float>::quiet_NaN());
  x[4] = sdk::F32ToBF16Bits(std::numeric_limits<float>::infinity());
  x[5] = sdk::F32ToBF16Bits(-std::numeric_limits<float>::infinity());
  const uint16_t s = sdk::F32ToBF16Bits(1.3f);
  struct Out {
    std::vector<uint16_t> r;
    std::vector<float> mf;
    std::vector<uint8_t> gt;
  };
  auto outputs = [&](Out* o, std::vector<void*>* data) {
    o->r.assign(rows * cols, 0);
    o->mf.assign(rows * cols, 0);
    o->gt.assign(rows * cols, 7);
    data->assign(c.b.g.values.size(), nullptr);
    (*data)[c.x] = x.data();
    (*data)[c.bias] = bias.data();
    (*data)[c.s] = const_cast<uint16_t*>(&s);
    (*data)[c.r] = o->r.data();
    (*data)[c.mf] = o->mf.data();
    (*data)[c.gt] = o->gt.data();
  };
  Out generated, interpreted;
  std::vector<void*> data;
  outputs(&generated, &data);
  std::vector<void*> args;
  for (int v : src->values) args.push_back(data[v]);
  run(args.data(), 0, src->units);  // Rows of the innermost dims.
  outputs(&interpreted, &data);
  auto loop = cpu::CompileFusedLoop(c.b.g, groups, 0);
  ASSERT_TRUE(loop.ok()) << loop.status();
  ASSERT_TRUE((*loop)->Run(data, {}).ok());
  EXPECT_EQ(generated.r, interpreted.r);
  EXPECT_EQ(generated.gt, interpreted.gt);
  for (int64_t i = 0; i < rows * cols; ++i) {
    const float g = generated.mf[i], w = interpreted.mf[i];
    EXPECT_TRUE(g == w || (g != g && w != w)) << i << ": " << g << " vs " << w;
  }
  dlclose(lib);
}

TEST(LoopCodegen, ReductionsAreLeftToTheInterpreter) {
  const Builder b = testing::ReluThenColumnSum();
  auto src = sdk::GenerateLoopSource(b.g, {0, 0}, 0);
  EXPECT_TRUE(absl::IsUnimplemented(src.status())) << src.status();
}

}  // namespace
}  // namespace mixrt
