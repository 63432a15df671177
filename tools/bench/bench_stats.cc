#include "tools/bench/bench_stats.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>
#include <utility>

namespace mixrt::bench {

double Quantile(const std::vector<double>& sorted, double q) {
  if (sorted.empty()) return 0;
  const double pos = q * (sorted.size() - 1);
  const size_t lo = static_cast<size_t>(std::floor(pos));
  const size_t hi = std::min(lo + 1, sorted.size() - 1);
  return sorted[lo] + (pos - lo) * (sorted[hi] - sorted[lo]);
}

double CoefficientOfVariation(const std::vector<double>& samples) {
  if (samples.size() < 2) return 0;
  const double mean =
      std::accumulate(samples.begin(), samples.end(), 0.0) / samples.size();
  double ss = 0;
  for (double x : samples) ss += (x - mean) * (x - mean);
  return mean > 0 ? std::sqrt(ss / (samples.size() - 1)) / mean : 0;
}

double MedianCiHalfWidth(const std::vector<double>& samples) {
  const size_t n = samples.size();
  if (n < 2) return std::numeric_limits<double>::infinity();
  std::vector<double> sorted = samples;
  std::sort(sorted.begin(), sorted.end());
  // The ranks n/2 -+ 1.96 sqrt(n)/2 bound the median with 95% confidence
  // whatever the distribution (the binomial's normal approximation).
  const double spread = 0.98 * std::sqrt(static_cast<double>(n));
  const double low_rank = std::floor(n / 2.0 - spread);
  const double high_rank = std::ceil(n / 2.0 + spread);
  if (low_rank < 0 || high_rank > static_cast<double>(n - 1)) {
    return std::numeric_limits<double>::infinity();  // Too few samples.
  }
  const double median = Quantile(sorted, 0.5);
  if (!(median > 0)) return std::numeric_limits<double>::infinity();
  const double width = sorted[static_cast<size_t>(high_rank)] -
                       sorted[static_cast<size_t>(low_rank)];
  return width / 2 / median;
}

SampleStats Summarize(const std::vector<double>& samples) {
  SampleStats s;
  s.count = static_cast<int>(samples.size());
  if (samples.empty()) return s;
  std::vector<double> sorted = samples;
  std::sort(sorted.begin(), sorted.end());
  s.min = sorted.front();
  s.max = sorted.back();
  s.median = Quantile(sorted, 0.5);
  s.p90 = Quantile(sorted, 0.9);
  s.mean = std::accumulate(sorted.begin(), sorted.end(), 0.0) / s.count;
  double ss = 0;
  for (double x : sorted) ss += (x - s.mean) * (x - s.mean);
  s.stddev = s.count > 1 ? std::sqrt(ss / (s.count - 1)) : 0;
  s.cv = CoefficientOfVariation(sorted);
  // Bootstrap the median.
  std::mt19937_64 rng(20261123);
  std::uniform_int_distribution<size_t> pick(0, sorted.size() - 1);
  std::vector<double> medians;
  std::vector<double> resample(sorted.size());
  for (int b = 0; b < 1000; ++b) {
    for (double& x : resample) x = sorted[pick(rng)];
    std::sort(resample.begin(), resample.end());
    medians.push_back(Quantile(resample, 0.5));
  }
  std::sort(medians.begin(), medians.end());
  s.median_ci_low = Quantile(medians, 0.025);
  s.median_ci_high = Quantile(medians, 0.975);
  return s;
}

MannWhitney MannWhitneyU(const std::vector<double>& a,
                         const std::vector<double>& b) {
  MannWhitney r;
  const double n1 = a.size(), n2 = b.size();
  if (a.empty() || b.empty()) return r;
  std::vector<std::pair<double, int>> all;
  for (double x : a) all.emplace_back(x, 0);
  for (double x : b) all.emplace_back(x, 1);
  std::sort(all.begin(), all.end());
  // Average ranks over ties; sum of t^3 - t for the variance correction.
  double rank_sum_a = 0, tie_term = 0;
  for (size_t i = 0; i < all.size();) {
    size_t j = i;
    while (j < all.size() && all[j].first == all[i].first) ++j;
    const double t = j - i;
    const double rank = (i + 1 + j) / 2.0;  // Ranks i+1 .. j.
    for (size_t k = i; k < j; ++k) {
      if (all[k].second == 0) rank_sum_a += rank;
    }
    tie_term += t * t * t - t;
    i = j;
  }
  r.u = rank_sum_a - n1 * (n1 + 1) / 2;
  const double n = n1 + n2;
  const double mean_u = n1 * n2 / 2;
  const double var_u = n1 * n2 / 12 * ((n + 1) - tie_term / (n * (n - 1)));
  if (var_u <= 0) return r;  // All values equal: no evidence of a difference.
  const double diff = r.u - mean_u;
  // Continuity correction toward the mean, as SciPy's default.
  const double corrected = std::max(std::fabs(diff) - 0.5, 0.0);
  r.z = (diff < 0 ? -corrected : corrected) / std::sqrt(var_u);
  r.p_value = std::min(1.0, std::erfc(std::fabs(r.z) / std::sqrt(2.0)));
  return r;
}

}  // namespace mixrt::bench
