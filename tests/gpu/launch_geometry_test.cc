// Launch geometry and multi-tensor chunking: pure host logic.
#include "backends/gpu/launch_geometry.h"

#include <map>
#include <vector>

#include "backends/gpu/multi_tensor_plan.h"
#include "gtest/gtest.h"

namespace mixrt::gpu {
namespace {

TEST(LaunchGeometry, GridStrideCoversWithoutOversubscribing) {
  DeviceLimits h100;
  h100.multiprocessors = 132;
  EXPECT_EQ(GridStrideGeometry(0, h100).blocks, 0);
  const Geometry one = GridStrideGeometry(1, h100);
  EXPECT_EQ(one.blocks, 1);
  EXPECT_EQ(one.threads, 256);
  EXPECT_EQ(GridStrideGeometry(256 * 10, h100).blocks, 10);
  // 1e9 elements: capped at 8 resident blocks per SM; the loop strides.
  EXPECT_EQ(GridStrideGeometry(1000000000, h100).blocks, 132 * 8);
  DeviceLimits small;
  small.max_threads_per_block = 128;
  EXPECT_EQ(GridStrideGeometry(1000, small).threads, 128);
}

TEST(LaunchGeometry, RowThreadsAreWarpMultiplesSizedToTheRow) {
  DeviceLimits nvidia;  // warp 32
  DeviceLimits cdna;
  cdna.warp_size = 64;
  EXPECT_EQ(RowGeometry(0, 10, nvidia).blocks, 0);
  EXPECT_EQ(RowGeometry(10, 1, nvidia).threads, 32);
  EXPECT_EQ(RowGeometry(10, 100, nvidia).threads, 128);
  EXPECT_EQ(RowGeometry(10, 100000, nvidia).threads, 256);
  EXPECT_EQ(RowGeometry(10, 1, cdna).threads, 64);
  EXPECT_EQ(RowGeometry(10, 100000, cdna).threads, 256);
  EXPECT_EQ(RowGeometry(int64_t{1} << 40, 8, nvidia).blocks, kMaxGridBlocks);
}

TEST(LaunchGeometry, ReductionsToFewOutputsAreSplitAcrossBlocks) {
  DeviceLimits h100;
  h100.multiprocessors = 132;
  // Enough outputs to fill the device: one block each.
  EXPECT_EQ(ReduceSplit(264, 1 << 20, h100), 1);
  EXPECT_EQ(ReduceSplit(100000, 1 << 20, h100), 1);
  // A full reduction of 64 Mi elements: two blocks per SM.
  EXPECT_EQ(ReduceSplit(1, 64 << 20, h100), 264);
  EXPECT_EQ(ReduceSplit(4, 64 << 20, h100), 66);
  // Small problems are not split below kMinSplitElements per block.
  EXPECT_EQ(ReduceSplit(1, 100, h100), 1);
  EXPECT_EQ(ReduceSplit(1, 5 * kMinSplitElements, h100), 5);
  EXPECT_EQ(ReduceSplit(0, 1 << 20, h100), 1);
}

// Every element of every non-empty tensor lands in exactly one block.
void ExpectExactCover(const std::vector<MultiTensorInput>& tensors,
                      int64_t chunk) {
  const auto launches = PlanMultiTensorLaunches(tensors, chunk);
  std::map<const void*, std::vector<int>> seen;
  for (const MultiTensorInput& t : tensors) {
    seen[t.data] = std::vector<int>(t.numel, 0);
  }
  for (const MultiTensorLaunch& l : launches) {
    ASSERT_GT(l.num_blocks, 0);
    ASSERT_LE(l.num_blocks, kMultiTensorMaxBlocks);
    ASSERT_LE(l.num_tensors, kMultiTensorMaxTensors);
    for (int b = 0; b < l.num_blocks; ++b) {
      const MultiTensorBlock& block = l.blocks[b];
      ASSERT_LT(block.tensor, l.num_tensors);
      ASSERT_LE(block.count, chunk);
      auto& hits = seen[l.data[block.tensor]];
      ASSERT_EQ(l.numel[block.tensor], static_cast<int64_t>(hits.size()));
      for (int64_t i = block.start; i < block.start + block.count; ++i) {
        ++hits.at(i);
      }
    }
  }
  for (const auto& [data, hits] : seen) {
    for (int h : hits) ASSERT_EQ(h, 1);
  }
}

TEST(MultiTensorPlan, CoversEveryElementOnceAcrossLaunches) {
  std::vector<float> storage(100000);
  std::vector<MultiTensorInput> tensors;
  int64_t offset = 0;
  // 60 tensors (more than one launch holds), sizes 0..~3000.
  for (int t = 0; t < 60; ++t) {
    const int64_t n = (t * 977) % 3001;
    tensors.push_back({storage.data() + offset, MIXRT_DTYPE_F32, n});
    offset += n + 1;
  }
  ExpectExactCover(tensors, 256);
  ExpectExactCover(tensors, kMultiTensorChunk);
  // One tensor bigger than a whole launch's blocks.
  ExpectExactCover({{storage.data(), MIXRT_DTYPE_F16, 99999}}, 100);
  EXPECT_TRUE(PlanMultiTensorLaunches({}).empty());
  EXPECT_TRUE(PlanMultiTensorLaunches({{storage.data(), 0, 0}}).empty());
}

TEST(MultiTensorPlan, LaunchFitsInOneKernelParameterBlock) {
  // CUDA before 12.1 and HIP take at most 4 KiB of kernel parameters; the
  // unscale functor adds two pointers.
  EXPECT_LE(sizeof(MultiTensorLaunch) + 2 * sizeof(void*), 4096u);
}

}  // namespace
}  // namespace mixrt::gpu
