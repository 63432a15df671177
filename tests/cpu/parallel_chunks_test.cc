// ParallelForChunks (backends/cpu/kernels/parallel.h): every item in
// exactly one call, each call a whole chunk (the last one shorter), on
// more than one thread when there is more than one chunk.
#include <omp.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <mutex>
#include <set>
#include <utility>
#include <vector>

#include "backends/cpu/kernels/parallel.h"
#include "gtest/gtest.h"

namespace mixrt::cpu {
namespace {

TEST(ParallelForChunksTest, EveryItemOnceInWholeChunks) {
  omp_set_num_threads(2);
  for (const auto& [n, chunk] : std::vector<std::pair<int64_t, int64_t>>{
           {1, 1}, {7, 2}, {128, 2}, {129, 8}, {64, 64}, {5, 100}}) {
    std::vector<std::atomic<int>> seen(n);
    std::mutex mu;
    std::set<std::pair<int64_t, int64_t>> calls;
    ParallelForChunks(n, chunk, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) seen[i].fetch_add(1);
      std::lock_guard<std::mutex> lock(mu);
      calls.insert({begin, end});
    });
    for (int64_t i = 0; i < n; ++i) {
      EXPECT_EQ(seen[i].load(), 1) << "item " << i << " of " << n;
    }
    if (chunk >= n) {
      EXPECT_EQ(calls.size(), 1u);
      continue;
    }
    for (const auto& [begin, end] : calls) {
      EXPECT_EQ(begin % chunk, 0) << n << " / " << chunk;
      EXPECT_EQ(end - begin, std::min(chunk, n - begin)) << n << " / " << chunk;
    }
  }
}

TEST(ParallelForChunksTest, ChunksShareTheThreads) {
  omp_set_num_threads(2);
  std::atomic<int> mask{0};
  // Each chunk waits until both threads have started one, or gives up.
  ParallelForChunks(4, 1, [&](int64_t, int64_t) {
    mask.fetch_or(1 << omp_get_thread_num());
    for (int spin = 0; spin < 100000000 && mask.load() != 3; ++spin) {
    }
  });
  EXPECT_EQ(mask.load(), 3) << "every chunk ran on one thread";
}

}  // namespace
}  // namespace mixrt::cpu
