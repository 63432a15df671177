// How a case is timed, after nvbench's rules: a warm-up, then samples until
// a minimum count and a minimum time are reached and the median is known
// precisely enough (its 95% confidence interval within +-max_noise of it),
// or a per-case timeout passes. (nvbench stops on the coefficient of
// variation, which never falls on a noisy machine however long it samples:
// on a busy 2-core machine every case ran to its timeout.) A step much
// shorter than a millisecond is repeated within each sample so the clock's
// resolution does not dominate; samples are per step.
#ifndef MIXRT_TOOLS_BENCH_BENCH_TIMING_H_
#define MIXRT_TOOLS_BENCH_BENCH_TIMING_H_

#include <functional>
#include <vector>

#include "absl/status/statusor.h"

namespace mixrt::bench {

struct TimingOptions {
  double warmup_s = 0.05;  // At least one step.
  int min_samples = 10;
  double min_time_s = 0.5;
  double max_noise = 0.02;  // Stop once the median's CI is within +-this...
  double timeout_s = 5;     // ...or at this, noisy or not.
  double min_sample_ms = 1.0;
};

struct Timing {
  std::vector<double> samples_ms;  // Per step.
  int steps_per_sample = 1;
  bool noise_met = false;  // max_noise was reached before the timeout.
  double seconds = 0;      // Spent timing (warm-up included).
};

absl::StatusOr<Timing> TimeSteps(const std::function<absl::Status()>& step,
                                 const TimingOptions& options);

}  // namespace mixrt::bench

#endif  // MIXRT_TOOLS_BENCH_BENCH_TIMING_H_
