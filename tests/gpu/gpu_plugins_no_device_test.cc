// On a machine without a GPU (every CI machine), both GPU plugins load, say
// why they have no device in the runtime's own words, score 0, and leave
// the host to the other backends.
#include <string>

#include "core/plugin/registry.h"
#include "gtest/gtest.h"
#include "tests/testing/test_plugins.h"

namespace mixrt {
namespace {

struct Expectation {
  const char* path;
  const char* name;
  const char* call;   // The runtime call the reason names.
  const char* build;  // Part of the build description.
};

const Expectation kPlugins[] = {
    {"backends/cuda/libmixrt_cuda.so", "cuda", "cudaGetDeviceCount",
     "kernels for sm_75, sm_80, sm_90 + PTX compute_90"},
    {"backends/rocm/libmixrt_rocm.so", "rocm", "hipGetDeviceCount",
     "code for gfx90a, gfx940"},
};

TEST(GpuPluginsWithoutDevice, LoadAndReportTheRuntimesReason) {
  for (const Expectation& e : kPlugins) {
    Registry registry;
    auto backend = registry.Load(testing::RunfilePath(e.path));
    ASSERT_TRUE(backend.ok()) << e.name << ": " << backend.status();
    const Backend& b = **backend;
    EXPECT_EQ(b.name(), e.name);
    EXPECT_EQ(b.identity().device_type, "cuda");
    EXPECT_NE(b.identity().build_info.find(e.build), std::string::npos)
        << b.identity().build_info;
    if (!b.devices().empty()) {
      GTEST_SKIP() << "a " << e.name << " device is present here";
    }
    EXPECT_EQ(b.identity().score, 0);
    EXPECT_NE(b.no_device_reason().find(e.call), std::string::npos)
        << b.no_device_reason();
    EXPECT_TRUE(registry.UsableBackends().empty());
    const auto found = registry.FindBackend(e.name);
    ASSERT_FALSE(found.ok());
    EXPECT_NE(std::string(found.status().message()).find("has no device"),
              std::string::npos);
    const auto reports = registry.Reports();
    ASSERT_EQ(reports.size(), 1u);
    EXPECT_FALSE(reports[0].usable);
    EXPECT_NE(reports[0].reason.find("no device: "), std::string::npos);
  }
}

TEST(GpuPluginsWithoutDevice, CudaReasonIsTheDriverErrorNotACount) {
  Registry registry;
  auto backend =
      registry.Load(testing::RunfilePath("backends/cuda/libmixrt_cuda.so"));
  ASSERT_TRUE(backend.ok());
  if (!(*backend)->devices().empty()) GTEST_SKIP() << "a CUDA device is here";
  // cudaGetDeviceCount leaves the count untouched on error: the plugin must
  // have read the error code (35 without a driver, 100 without a device).
  const std::string& reason = (*backend)->no_device_reason();
  EXPECT_TRUE(reason.find("cudaErrorInsufficientDriver (35)") !=
                  std::string::npos ||
              reason.find("cudaErrorNoDevice (100)") != std::string::npos)
      << reason;
}

}  // namespace
}  // namespace mixrt
