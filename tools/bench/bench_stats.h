// Statistics of one benchmark case's timing samples, and the test that says
// whether two sets of samples differ (for `mixrt bench compare`).
#ifndef MIXRT_TOOLS_BENCH_BENCH_STATS_H_
#define MIXRT_TOOLS_BENCH_BENCH_STATS_H_

#include <cstdint>
#include <vector>

namespace mixrt::bench {

// Fewer samples than this cannot make a Mann-Whitney U test significant
// at any usual alpha: `mixrt bench compare` refuses them, so a timed case
// (ours or a peer's) stops at its timeout only once it has this many.
constexpr int kMinComparableSamples = 3;

struct SampleStats {
  int count = 0;
  double median = 0, min = 0, max = 0, mean = 0;
  double stddev = 0;  // Sample standard deviation (n - 1).
  double cv = 0;      // stddev / mean.
  double p90 = 0;     // Linear interpolation between order statistics.
  // 95% bootstrap confidence interval of the median (percentile method,
  // 1000 resamples, fixed seed: the same samples give the same interval).
  double median_ci_low = 0, median_ci_high = 0;
};

// Empty samples give count 0 and zeros.
SampleStats Summarize(const std::vector<double>& samples);
// stddev / mean alone (cheap: no sorting, no bootstrap).
double CoefficientOfVariation(const std::vector<double>& samples);

// Half the width of the median's 95% confidence interval, relative to the
// median, from order statistics (distribution-free and cheap: one sort);
// infinity while the samples are too few (fewer than 8) to bound it.
// Unlike the CV, it shrinks as samples accumulate, so a noisy machine
// still reaches a precise median.
double MedianCiHalfWidth(const std::vector<double>& samples);

// The q-quantile (0..1) of `sorted`, interpolating linearly (NumPy's
// default).
double Quantile(const std::vector<double>& sorted, double q);

struct MannWhitney {
  double u = 0;        // U of the first sample.
  double z = 0;        // Normal approximation, tie- and continuity-corrected.
  double p_value = 1;  // Two-sided.
};

// The Mann-Whitney U test (Wilcoxon rank-sum): do a and b come from the
// same distribution? Ties get average ranks. p = 1 when either is empty.
MannWhitney MannWhitneyU(const std::vector<double>& a,
                         const std::vector<double>& b);

}  // namespace mixrt::bench

#endif  // MIXRT_TOOLS_BENCH_BENCH_STATS_H_
