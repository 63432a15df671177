// The CPU plugin's capability matrix is detected, not assumed: it must agree
// with what this machine's CPU and oneDNN build can do. Run twice by the
// BUILD file: as is, and with ONEDNN_MAX_CPU_ISA=AVX2 (oneDNN's own cap),
// which must turn bf16 matmul into the emulated path.
#include <cstdlib>
#include <string>

#include "common/cpu_info_field.h"
#include "core/plugin/registry.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/test_plugins.h"

namespace mixrt {
namespace {

using ::testing::HasSubstr;

bool CpuHasFlag(const std::string& flag) { return CpuFlags().count(flag) > 0; }

bool CappedAtAvx2() {
  const char* cap = std::getenv("ONEDNN_MAX_CPU_ISA");
  return cap != nullptr && std::string(cap) == "AVX2";
}

class CpuCapabilityTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto backend =
        registry_.Load(testing::RunfilePath("backends/cpu/libmixrt_cpu.so"));
    ASSERT_TRUE(backend.ok()) << backend.status();
    backend_ = *backend;
    ASSERT_EQ(backend_->devices().size(), 1u);
  }
  const CapabilityEntry& Cap(MixrtOpClass c, DType d) const {
    return backend_->devices()[0].capability(c, d);
  }
  Registry registry_;
  const Backend* backend_ = nullptr;
};

TEST_F(CpuCapabilityTest, F32IsNativeEverywhere) {
  for (int c = 0; c < MIXRT_OP_CLASS_COUNT; ++c) {
    EXPECT_EQ(Cap(static_cast<MixrtOpClass>(c), DType::kF32).level,
              MIXRT_SUPPORT_NATIVE)
        << OpClassName(static_cast<MixrtOpClass>(c));
  }
  EXPECT_GT(backend_->identity().score, 1);  // Preferred over the reference.
}

TEST_F(CpuCapabilityTest, Bf16MatmulFollowsTheIsa) {
  const CapabilityEntry& bf16 = Cap(MIXRT_OP_CLASS_MATMUL, DType::kBF16);
  if (CappedAtAvx2() || !CpuHasFlag("avx512f")) {
    // oneDNN 2.6 has no bf16 matmul below avx512_core: emulated via f32.
    EXPECT_EQ(bf16.level, MIXRT_SUPPORT_SLOW);
    EXPECT_THAT(bf16.reason, HasSubstr("emulated"));
    EXPECT_THAT(bf16.reason, HasSubstr("has no bf16 matmul for avx2"));
  } else {
    EXPECT_THAT(bf16.reason, HasSubstr("oneDNN brg:avx512_core"));
    // Native or slow is decided by the measurement, which says so.
    EXPECT_NE(bf16.level, MIXRT_SUPPORT_UNSUPPORTED);
  }
}

TEST_F(CpuCapabilityTest, F16MatmulIsEmulatedWithoutAnF16Gemm) {
  const CapabilityEntry& f16 = Cap(MIXRT_OP_CLASS_MATMUL, DType::kF16);
  // Debian's oneDNN 2.6.3 has no f16 matmul on any ISA.
  EXPECT_EQ(f16.level, MIXRT_SUPPORT_SLOW);
  EXPECT_THAT(f16.reason, HasSubstr("has no f16 matmul"));
}

TEST_F(CpuCapabilityTest, IntegersOnlyWhereTheyMakeSense) {
  EXPECT_EQ(Cap(MIXRT_OP_CLASS_ELEMENTWISE, DType::kI64).level,
            MIXRT_SUPPORT_NATIVE);
  EXPECT_EQ(Cap(MIXRT_OP_CLASS_MATMUL, DType::kI32).level,
            MIXRT_SUPPORT_UNSUPPORTED);
}

}  // namespace
}  // namespace mixrt
