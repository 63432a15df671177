// `mixrt bench compare A.json B.json [...]`: the same cases across machines
// or commits. The first run is the baseline; each case (case, backend,
// precision, mode; with `any_backend`, the fastest backend per case; of a
// run with rounds (--rounds), the fastest round) gets
// every run's median, its speed relative to the baseline and a Mann-Whitney
// U test on the raw samples. Geometric means summarize each run.
#ifndef MIXRT_TOOLS_BENCH_BENCH_COMPARE_H_
#define MIXRT_TOOLS_BENCH_BENCH_COMPARE_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace mixrt::bench {

struct CompareCell {
  bool present = false;
  double median_ms = 0;
  double speedup = 0;        // baseline median / this median: > 1 is faster.
  double p_value = 1;        // Mann-Whitney U against the baseline's samples.
  bool significant = false;  // p < alpha.
};

struct CompareRow {
  std::string key;                 // "case backend precision mode".
  std::vector<CompareCell> cells;  // One per run; cells[0] is the baseline.
};

struct Comparison {
  std::vector<std::string> labels;  // Per run: file, CPU, commit.
  std::vector<CompareRow> rows;
  std::vector<double> geomean_speedup;  // Per run, over rows in both.
  double alpha = 0.05;
};

struct CompareOptions {
  double alpha = 0.05;
  bool any_backend = false;
};

// `runs` are RunJson documents; `names` label them (file names).
absl::StatusOr<Comparison> Compare(const std::vector<nlohmann::json>& runs,
                                   const std::vector<std::string>& names,
                                   const CompareOptions& options);
std::string ComparisonMarkdown(const Comparison& comparison);
// Rows where a run is significantly slower than the baseline by more than
// `threshold` (0.05: 5%), as "key: 0.81x (p=0.001)".
std::vector<std::string> Regressions(const Comparison& comparison,
                                     double threshold);

}  // namespace mixrt::bench

#endif  // MIXRT_TOOLS_BENCH_BENCH_COMPARE_H_
