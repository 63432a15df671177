// How a case is timed, after nvbench's rules: a warm-up, then samples until
// a minimum count and a minimum time are reached and the noise (coefficient
// of variation) is under a limit, or a per-case timeout passes. A step much
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
  double max_noise = 0.05;  // Stop once the CV is below this...
  double timeout_s = 10;    // ...or at this, noisy or not.
  double min_sample_ms = 1.0;
};

struct Timing {
  std::vector<double> samples_ms;  // Per step.
  int steps_per_sample = 1;
  bool noise_met = false;  // The CV limit was reached before the timeout.
  double seconds = 0;      // Spent timing (warm-up included).
};

absl::StatusOr<Timing> TimeSteps(const std::function<absl::Status()>& step,
                                 const TimingOptions& options);

}  // namespace mixrt::bench

#endif  // MIXRT_TOOLS_BENCH_BENCH_TIMING_H_
