// The system libraries the build wires in (third_party/BUILD) link and run,
// and are the versions TOOLCHAIN-FACTS was measured with or newer.
#include "benchmark/benchmark.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "oneapi/dnnl/dnnl.h"

namespace {

TEST(SystemLibraries, OneDnnLinksAndReportsItsVersion) {
  const dnnl_version_t* v = dnnl_version();
  ASSERT_NE(v, nullptr);
  EXPECT_GE(v->major * 100 + v->minor, 206) << "oneDNN older than 2.6";
}

TEST(SystemLibraries, JsonRoundTrips) {
  const nlohmann::json j = nlohmann::json::parse(R"({"a": [1, 2.5]})");
  EXPECT_EQ(j["a"][1].get<double>(), 2.5);
}

TEST(SystemLibraries, GoogleBenchmarkLinks) {
  benchmark::DoNotOptimize(42);
  SUCCEED();
}

}  // namespace
