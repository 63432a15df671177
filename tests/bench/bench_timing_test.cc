// mixrt bench's timing loop: when it stops, and that a case cut off by its
// timeout still has the samples `mixrt bench compare` needs.
#include "tools/bench/bench_timing.h"

#include <chrono>
#include <thread>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tools/bench/bench_stats.h"

namespace mixrt::bench {
namespace {

absl::Status SleepMs(int ms) {
  std::this_thread::sleep_for(std::chrono::milliseconds(ms));
  return absl::OkStatus();
}

// A step longer than the whole timeout: the loop used to stop at two
// samples, and `mixrt bench compare` refused the run (the --quick suite on
// a slow CI machine, mlp_train_small at 0.5 s).
TEST(TimeStepsTest, TimeoutStillLeavesComparableSamples) {
  TimingOptions options;
  options.warmup_s = 0;
  options.min_samples = 1;
  options.min_time_s = 0;
  options.timeout_s = 0.001;
  absl::StatusOr<Timing> t = TimeSteps([] { return SleepMs(5); }, options);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(static_cast<int>(t->samples_ms.size()), kMinComparableSamples);
  EXPECT_FALSE(t->noise_met);
  for (double ms : t->samples_ms) EXPECT_GE(ms, 5.0);
}

// Steady samples stop on precision, with at least min_samples of them.
TEST(TimeStepsTest, PreciseMedianStopsBeforeTimeout) {
  TimingOptions options;
  options.warmup_s = 0;
  options.min_samples = 10;
  options.min_time_s = 0;
  options.max_noise = 0.5;
  options.timeout_s = 60;
  absl::StatusOr<Timing> t = TimeSteps([] { return SleepMs(2); }, options);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_TRUE(t->noise_met);
  EXPECT_GE(t->samples_ms.size(), 10u);
  EXPECT_LT(t->seconds, 30);
}

TEST(TimeStepsTest, StepErrorIsReturned) {
  TimingOptions options;
  absl::StatusOr<Timing> t =
      TimeSteps([] { return absl::InternalError("kernel failed"); }, options);
  EXPECT_THAT(t.status().message(), testing::HasSubstr("kernel failed"));
}

}  // namespace
}  // namespace mixrt::bench
