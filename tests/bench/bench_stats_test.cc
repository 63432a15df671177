// mixrt bench's statistics on synthetic samples, against values computed
// independently (NumPy 1.24 and SciPy 1.10 on Debian 12; the commands are
// beside each expectation).
#include "tools/bench/bench_stats.h"

#include <limits>
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

TEST(BenchStats, MedianIntervalFromOrderStatistics) {
  // 1..100: ranks 50 -+ 0.98 * 10 -> [40, 60] (0-based) hold 41 and 61;
  // the median is 50.5: half width 10 / 50.5.
  std::vector<double> hundred;
  for (int i = 100; i >= 1; --i) hundred.push_back(i);  // Order is irrelevant.
  EXPECT_NEAR(MedianCiHalfWidth(hundred), 10.0 / 50.5, 1e-12);
  // Too few samples to bound the median at 95%: never precise enough.
  EXPECT_EQ(MedianCiHalfWidth({1, 2, 3, 4, 5, 6, 7}),
            std::numeric_limits<double>::infinity());
  EXPECT_EQ(MedianCiHalfWidth({5, 5, 5, 5, 5, 5, 5, 5}), 0);
  // The same spread, sampled longer, bounds the median more tightly: the
  // property the stopping rule needs (the CV stays put).
  const std::vector<double> ten = {9, 10, 11, 12, 8, 10, 13, 7, 10, 11};
  std::vector<double> hundred_noisy;
  for (int i = 0; i < 10; ++i) {
    hundred_noisy.insert(hundred_noisy.end(), ten.begin(), ten.end());
  }
  EXPECT_LT(MedianCiHalfWidth(hundred_noisy), MedianCiHalfWidth(ten));
  EXPECT_NEAR(CoefficientOfVariation(hundred_noisy),
              CoefficientOfVariation(ten), 0.01);
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
