// mixrt bench's statistics on synthetic samples, against values computed
// independently (NumPy 1.24 and SciPy 1.10 on Debian 12; the commands are
// beside each expectation).
#include "tools/bench/bench_stats.h"

#include <vector>

#include "gtest/gtest.h"

namespace mixrt::bench {
namespace {

TEST(BenchStats, SummaryMatchesNumPy) {
  // np.median, np.percentile(x, 90), np.std(x, ddof=1), np.mean of:
  const std::vector<double> x = {3, 1, 4, 1, 5, 9, 2, 6};
  const SampleStats s = Summarize(x);
  EXPECT_EQ(s.count, 8);
  EXPECT_DOUBLE_EQ(s.median, 3.5);
  EXPECT_NEAR(s.p90, 6.9, 1e-12);
  EXPECT_NEAR(s.stddev, 2.748376143938713, 1e-12);
  EXPECT_DOUBLE_EQ(s.mean, 3.875);
  EXPECT_DOUBLE_EQ(s.min, 1);
  EXPECT_DOUBLE_EQ(s.max, 9);
  EXPECT_NEAR(s.cv, 2.748376143938713 / 3.875, 1e-12);
  // The bootstrap interval holds the median and stays within the data.
  EXPECT_LE(s.median_ci_low, s.median);
  EXPECT_GE(s.median_ci_high, s.median);
  EXPECT_GE(s.median_ci_low, 1);
  EXPECT_LE(s.median_ci_high, 9);
  EXPECT_LT(s.median_ci_low, s.median_ci_high);
}

TEST(BenchStats, ConstantSamplesHaveNoNoiseAndAPointInterval) {
  const SampleStats s = Summarize({2.5, 2.5, 2.5, 2.5});
  EXPECT_EQ(s.cv, 0);
  EXPECT_EQ(s.median_ci_low, 2.5);
  EXPECT_EQ(s.median_ci_high, 2.5);
  EXPECT_EQ(Summarize({}).count, 0);
}

TEST(BenchStats, MannWhitneyMatchesSciPy) {
  // mannwhitneyu([1..5], [6..10], alternative='two-sided',
  //              method='asymptotic') -> U 0, p 0.012185780355344813
  MannWhitney r = MannWhitneyU({1, 2, 3, 4, 5}, {6, 7, 8, 9, 10});
  EXPECT_EQ(r.u, 0);
  EXPECT_NEAR(r.p_value, 0.012185780355344813, 1e-12);
  // With ties: ([1, 2, 2, 3, 5, 8], [2, 3, 3, 4, 9]) -> U 11, p 0.5150756...
  r = MannWhitneyU({1, 2, 2, 3, 5, 8}, {2, 3, 3, 4, 9});
  EXPECT_EQ(r.u, 11);
  EXPECT_NEAR(r.p_value, 0.5150756716148062, 1e-12);
  // Symmetric in its p-value.
  EXPECT_NEAR(MannWhitneyU({2, 3, 3, 4, 9}, {1, 2, 2, 3, 5, 8}).p_value,
              0.5150756716148062, 1e-12);
  EXPECT_EQ(MannWhitneyU({}, {1, 2}).p_value, 1);
  EXPECT_EQ(MannWhitneyU({4, 4, 4}, {4, 4}).p_value, 1);
}

}  // namespace
}  // namespace mixrt::bench
