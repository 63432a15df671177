#include "core/distributed/distributed_sampler.h"

#include <algorithm>
#include <set>

#include "gtest/gtest.h"

namespace mixrt::distributed {
namespace {

std::vector<int64_t> Shard(int64_t size, int world, int rank, int64_t epoch,
                           DistributedSamplerOptions options = {}) {
  auto s = DistributedSampler::Create(size, world, rank, options);
  EXPECT_TRUE(s.ok()) << s.status();
  s->set_epoch(epoch);
  return s->indices();
}

TEST(DistributedSamplerTest, ShardsAreDisjointAndCoverTheEpoch) {
  std::vector<int64_t> all;
  for (int rank = 0; rank < 3; ++rank) {
    const std::vector<int64_t> mine = Shard(30, 3, rank, 0);
    EXPECT_EQ(mine.size(), 10u);
    all.insert(all.end(), mine.begin(), mine.end());
  }
  std::sort(all.begin(), all.end());
  std::vector<int64_t> want(30);
  for (int i = 0; i < 30; ++i) want[i] = i;
  EXPECT_EQ(all, want);
}

TEST(DistributedSamplerTest, UnevenEpochsArePaddedOrDropped) {
  // 10 over 4 ranks: 3 each, 2 indices repeated from the epoch's start.
  std::multiset<int64_t> padded;
  for (int rank = 0; rank < 4; ++rank) {
    for (int64_t i : Shard(10, 4, rank, 0, {.shuffle = false}))
      padded.insert(i);
  }
  EXPECT_EQ(padded.size(), 12u);
  EXPECT_EQ(padded.count(0), 2u);
  EXPECT_EQ(padded.count(1), 2u);
  EXPECT_EQ(padded.count(9), 1u);
  // Unshuffled, rank 1 takes every 4th index from 1.
  EXPECT_EQ(Shard(10, 4, 1, 0, {.shuffle = false}),
            (std::vector<int64_t>{1, 5, 9}));
  EXPECT_EQ(Shard(10, 4, 1, 0, {.shuffle = false, .drop_last = true}),
            (std::vector<int64_t>{1, 5}));
}

TEST(DistributedSamplerTest, EpochsReshuffleTheSameWayOnEveryRank) {
  const std::vector<int64_t> e0 = Shard(100, 2, 0, 0, {.seed = 7});
  EXPECT_EQ(e0, Shard(100, 2, 0, 0, {.seed = 7}));
  EXPECT_NE(e0, Shard(100, 2, 0, 1, {.seed = 7}));
  EXPECT_NE(e0, Shard(100, 2, 0, 0, {.seed = 8}));
  std::vector<int64_t> unshuffled;
  for (int i = 0; i < 100; i += 2) unshuffled.push_back(i);
  EXPECT_NE(e0, unshuffled);
}

TEST(DistributedSamplerTest, AGlobalBatchIsTheSameSetOnAnyNumberOfRanks) {
  // Global batch 8, the second of epoch 3: on 1, 2 and 4 ranks.
  auto global_batch = [](int world) {
    std::set<int64_t> rows;
    const int per = 8 / world;
    for (int r = 0; r < world; ++r) {
      const std::vector<int64_t> mine = Shard(64, world, r, 3, {.seed = 5});
      rows.insert(mine.begin() + per, mine.begin() + 2 * per);
    }
    return rows;
  };
  EXPECT_EQ(global_batch(1).size(), 8u);
  EXPECT_EQ(global_batch(1), global_batch(2));
  EXPECT_EQ(global_batch(1), global_batch(4));
}

TEST(DistributedSamplerTest, BadArgumentsAreNamed) {
  auto s = DistributedSampler::Create(10, 2, 2);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("rank 2"), std::string::npos);
  EXPECT_FALSE(DistributedSampler::Create(10, 0, 0).ok());
  EXPECT_FALSE(DistributedSampler::Create(-1, 1, 0).ok());
}

}  // namespace
}  // namespace mixrt::distributed
