#include "core/allocator/caching_allocator.h"
#include "core/tensor/factories.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/test_plugins.h"

namespace mixrt {
namespace {

using ::testing::HasSubstr;

class AllocatorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    device_ = testing::ReferenceDevice();
    ASSERT_TRUE(device_.valid());
    allocator().EmptyCache();
    allocator().ResetPeak();
  }
  CachingAllocator& allocator() {
    return device_.backend()->allocator(device_.index());
  }
  Device device_;
};

TEST_F(AllocatorTest, RoundsToBlocks) {
  EXPECT_EQ(CachingAllocator::RoundSize(0), 512u);
  EXPECT_EQ(CachingAllocator::RoundSize(1), 512u);
  EXPECT_EQ(CachingAllocator::RoundSize(512), 512u);
  EXPECT_EQ(CachingAllocator::RoundSize(513), 1024u);
  EXPECT_EQ(CachingAllocator::RoundSize(UINT64_MAX), 0u);  // Refused.
}

TEST_F(AllocatorTest, TracksInUsePeakAndReuse) {
  const AllocatorStats before = allocator().stats();
  {
    // 1000 f32 = 4000 bytes -> one 4096-byte block.
    auto a = empty({1000}, DType::kF32, device_);
    ASSERT_TRUE(a.ok());
    EXPECT_EQ(allocator().stats().bytes_in_use, before.bytes_in_use + 4096);
    {
      auto b = empty({10}, DType::kF16, device_);  // 20 bytes -> 512.
      ASSERT_TRUE(b.ok());
      EXPECT_EQ(allocator().stats().peak_bytes_in_use,
                before.bytes_in_use + 4096 + 512);
    }
    EXPECT_EQ(allocator().stats().bytes_in_use, before.bytes_in_use + 4096);
    EXPECT_EQ(allocator().stats().bytes_cached, 512u);
  }
  const AllocatorStats after_free = allocator().stats();
  EXPECT_EQ(after_free.bytes_in_use, before.bytes_in_use);
  EXPECT_EQ(after_free.num_plugin_allocations,
            before.num_plugin_allocations + 2);

  // Same sizes again: served from the cache, no plugin call.
  {
    auto a = empty({1000}, DType::kF32, device_);
    auto b = empty({10}, DType::kF16, device_);
    ASSERT_TRUE(a.ok() && b.ok());
  }
  EXPECT_EQ(allocator().stats().num_plugin_allocations,
            after_free.num_plugin_allocations);
  EXPECT_EQ(allocator().stats().num_allocations,
            after_free.num_allocations + 2);

  allocator().ResetPeak();
  EXPECT_EQ(allocator().stats().peak_bytes_in_use,
            allocator().stats().bytes_in_use);
  allocator().EmptyCache();
  EXPECT_EQ(allocator().stats().bytes_cached, 0u);
  EXPECT_EQ(allocator().stats().num_plugin_frees, before.num_plugin_frees + 2);
}

TEST_F(AllocatorTest, ViewsShareOneBlock) {
  const uint64_t in_use = allocator().stats().bytes_in_use;
  auto a = zeros({64, 64}, DType::kF32, device_);
  ASSERT_TRUE(a.ok());
  auto t = a->transpose(0, 1);
  auto s = a->slice(0, 0, 8);
  ASSERT_TRUE(t.ok() && s.ok());
  EXPECT_EQ(allocator().stats().bytes_in_use, in_use + 64 * 64 * 4);
}

TEST_F(AllocatorTest, HugeAllocationIsAStatusNamingBytesAndDevice) {
  // 2^40 f32 elements = 4 TiB: more than this machine has.
  auto huge = empty({int64_t{1} << 40}, DType::kF32, device_);
  ASSERT_FALSE(huge.ok());
  EXPECT_TRUE(absl::IsResourceExhausted(huge.status())) << huge.status();
  EXPECT_THAT(huge.status().message(),
              ::testing::AllOf(HasSubstr("4398046511104 bytes"),
                               HasSubstr("reference:0")));
}

TEST_F(AllocatorTest, FreeingAnUnknownPointerIsIgnored) {
  const AllocatorStats before = allocator().stats();
  int not_ours = 0;
  allocator().Free(&not_ours);
  EXPECT_EQ(allocator().stats().bytes_in_use, before.bytes_in_use);
  EXPECT_EQ(allocator().stats().bytes_cached, before.bytes_cached);
}

}  // namespace
}  // namespace mixrt
