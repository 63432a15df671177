// The op profile counts every launch under its op and dtypes, only while
// enabled, and tabulates them.
#include "core/tensor/op_profile.h"

#include <string>
#include <vector>

#include "core/kernels/pointwise.h"
#include "core/tensor/factories.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/test_plugins.h"

namespace mixrt {
namespace {

using ::testing::HasSubstr;

const OpProfileEntry* Find(const std::vector<OpProfileEntry>& entries,
                           const std::string& op) {
  for (const OpProfileEntry& e : entries) {
    if (e.op == op) return &e;
  }
  return nullptr;
}

TEST(OpProfile, CountsLaunchesByOpAndDtypesOnlyWhileEnabled) {
  const Device device = testing::ReferenceDevice();
  auto a = full({4, 3}, 2.0, DType::kF32, device);
  auto b = full({4, 3}, 3.0, DType::kBF16, device);
  ASSERT_TRUE(a.ok() && b.ok());
  ResetOpProfile();
  EnableOpProfile(true);
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(kernels::add(*a, *a).ok());
  ASSERT_TRUE(b->to(DType::kF32).ok());
  EnableOpProfile(false);
  ASSERT_TRUE(kernels::add(*a, *a).ok());  // Not counted.

  const std::vector<OpProfileEntry> entries = OpProfileEntries();
  const OpProfileEntry* add = Find(entries, "binary f32 -> f32");
  ASSERT_NE(add, nullptr) << OpProfileTable();
  EXPECT_EQ(add->calls, 3);
  EXPECT_GT(add->seconds, 0);
  const OpProfileEntry* cast = Find(entries, "copy bf16 -> f32");
  ASSERT_NE(cast, nullptr) << OpProfileTable();
  EXPECT_EQ(cast->calls, 1);
  EXPECT_THAT(OpProfileTable(), HasSubstr("binary f32 -> f32"));
  EXPECT_THAT(OpProfileTable(), HasSubstr("all kernels"));

  ResetOpProfile();
  EXPECT_TRUE(OpProfileEntries().empty());
}

}  // namespace
}  // namespace mixrt
