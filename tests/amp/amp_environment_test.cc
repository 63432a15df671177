// MIXRT_DISABLE_AMP, as each test binary below sets it in its environment:
// 1/true/yes/on disable AMP, 0/false/no/off/empty leave it on, anything
// else is an error from every autocast region and scaler, so nobody is left
// unsure whether AMP ran.
#include <cstdlib>
#include <string>

#include "absl/status/statusor.h"
#include "core/amp/autocast/autocast.h"
#include "core/amp/grad_scaler/grad_scaler.h"
#include "core/functional/ops.h"
#include "core/tensor/factories.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/test_plugins.h"

namespace mixrt {
namespace {

using ::testing::HasSubstr;

TEST(AmpEnvironment, AcceptedSpellings) {
  for (const char* on : {"1", "true", "TRUE", "yes", "On", " on "}) {
    absl::StatusOr<bool> v = ParseDisableAmpValue(on);
    ASSERT_TRUE(v.ok()) << on;
    EXPECT_TRUE(*v) << on;
  }
  for (const char* off : {"", "0", "false", "no", "OFF"}) {
    absl::StatusOr<bool> v = ParseDisableAmpValue(off);
    ASSERT_TRUE(v.ok()) << off;
    EXPECT_FALSE(*v) << off;
  }
  for (const char* bad : {"2", "maybe", "y", "disable"}) {
    absl::StatusOr<bool> v = ParseDisableAmpValue(bad);
    EXPECT_EQ(v.status().code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_THAT(v.status().message(), HasSubstr("1, true, yes or on"));
  }
}

TEST(AmpEnvironment, TheProcessEnvironmentIsHonoured) {
  const char* env = std::getenv(kDisableAmpEnv);
  ASSERT_NE(env, nullptr) << "set by the BUILD rule";
  const std::string value = env;
  const Device d = testing::ReferenceDevice();
  Tensor a = *ones({4, 4}, DType::kF32, d);
  absl::StatusOr<Tensor> out;
  {
    AutocastGuard autocast("cpu", DType::kBF16);
    out = matmul(a, a);
  }
  GradScaler scaler(d);
  absl::StatusOr<Tensor> scaled = scaler.scale(*ones({1}, DType::kF32, d));
  if (value == "maybe") {
    EXPECT_FALSE(AmpGloballyDisabled());
    EXPECT_THAT(out.status().message(), HasSubstr("MIXRT_DISABLE_AMP='maybe'"));
    EXPECT_THAT(scaled.status().message(),
                HasSubstr("MIXRT_DISABLE_AMP='maybe'"));
    // Outside autocast nothing is refused.
    EXPECT_TRUE(matmul(a, a).ok());
  } else {
    ASSERT_EQ(value, "yes");
    EXPECT_TRUE(AmpGloballyDisabled());
    ASSERT_TRUE(out.ok()) << out.status();
    EXPECT_EQ(out->dtype(), DType::kF32) << "autocast ran while disabled";
    ASSERT_TRUE(scaled.ok());
    EXPECT_EQ(*scaled->item(), 1.0) << "the scaler scaled while disabled";
  }
}

}  // namespace
}  // namespace mixrt
