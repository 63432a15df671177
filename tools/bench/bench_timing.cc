#include "tools/bench/bench_timing.h"

#include <chrono>
#include <cmath>

#include "absl/status/statusor.h"
#include "mixrt/status_macros.h"
#include "tools/bench/bench_stats.h"

namespace mixrt::bench {

absl::StatusOr<Timing> TimeSteps(const std::function<absl::Status()>& step,
                                 const TimingOptions& options) {
  using Clock = std::chrono::steady_clock;
  auto seconds_since = [](Clock::time_point t) {
    return std::chrono::duration<double>(Clock::now() - t).count();
  };
  Timing t;
  const Clock::time_point begin = Clock::now();
  int warm_steps = 0;
  do {
    MIXRT_RETURN_IF_ERROR(step());
    ++warm_steps;
  } while (seconds_since(begin) < options.warmup_s);
  const double step_ms = seconds_since(begin) * 1e3 / warm_steps;
  if (step_ms < options.min_sample_ms) {
    t.steps_per_sample =
        static_cast<int>(std::ceil(options.min_sample_ms / step_ms));
  }
  const Clock::time_point timing = Clock::now();
  while (true) {
    const Clock::time_point s = Clock::now();
    for (int i = 0; i < t.steps_per_sample; ++i) MIXRT_RETURN_IF_ERROR(step());
    t.samples_ms.push_back(seconds_since(s) * 1e3 / t.steps_per_sample);
    const double elapsed = seconds_since(timing);
    if (static_cast<int>(t.samples_ms.size()) >= options.min_samples &&
        elapsed >= options.min_time_s) {
      if (MedianCiHalfWidth(t.samples_ms) <= options.max_noise) {
        t.noise_met = true;
        break;
      }
    }
    // A case stopped by its timeout still has enough samples to compare
    // (two made a whole --quick run refused by `mixrt bench compare`).
    if (elapsed >= options.timeout_s &&
        static_cast<int>(t.samples_ms.size()) >= kMinComparableSamples) {
      break;
    }
  }
  t.seconds = seconds_since(begin);
  return t;
}

}  // namespace mixrt::bench
