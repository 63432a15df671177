#include "backends/cpu/capability/load_aware_threads.h"

#include <omp.h>
#include <sched.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "tools/bench/busy_loops.h"

namespace mixrt::cpu {
namespace {

TEST(OtherProcessesRunnable, IsTheSystemsLessOurs) {
  EXPECT_EQ(OtherProcessesRunnable(3, 2), 1);
  EXPECT_EQ(OtherProcessesRunnable(2, 2), 0);
  // Our threads counted by us but not by the system (the two reads are not
  // one instant) never make a negative count.
  EXPECT_EQ(OtherProcessesRunnable(1, 3), 0);
}

TEST(ThreadsLeftFree, AllConfiguredThreadsWhenNoOtherProcessRuns) {
  EXPECT_EQ(ThreadsLeftFree(2, 2, 0), 2);
  EXPECT_EQ(ThreadsLeftFree(8, 64, 0), 8);
}

TEST(ThreadsLeftFree, LeavesOtherProcessesTheirCores) {
  EXPECT_EQ(ThreadsLeftFree(2, 2, 1), 1);    // One busy loop beside.
  EXPECT_EQ(ThreadsLeftFree(8, 4, 1), 3);    // One of four cores taken.
  EXPECT_EQ(ThreadsLeftFree(2, 64, 30), 2);  // Plenty left.
}

TEST(ThreadsLeftFree, NeverBelowOneThread) {
  EXPECT_EQ(ThreadsLeftFree(2, 2, 5), 1);
  EXPECT_EQ(ThreadsLeftFree(1, 2, 0), 1);
  EXPECT_EQ(ThreadsLeftFree(0, 2, 0), 1);
}

TEST(ParseRunnableFromLoadavg, ReadsTheRunnableCount) {
  EXPECT_EQ(ParseRunnableFromLoadavg("1.08 1.57 1.87 3/166 9782\n"), 3);
  EXPECT_EQ(ParseRunnableFromLoadavg("0.00 0.00 0.00 12/4000 1"), 12);
}

TEST(ParseRunnableFromLoadavg, RefusesOtherText) {
  EXPECT_EQ(ParseRunnableFromLoadavg(""), std::nullopt);
  EXPECT_EQ(ParseRunnableFromLoadavg("1.08 1.57 1.87"), std::nullopt);
  EXPECT_EQ(ParseRunnableFromLoadavg("1.08 1.57 1.87 3 166"), std::nullopt);
  EXPECT_EQ(ParseRunnableFromLoadavg("1.08 1.57 1.87 x/166 1"), std::nullopt);
  EXPECT_EQ(ParseRunnableFromLoadavg("1.08 1.57 1.87 -1/166 1"), std::nullopt);
}

TEST(IsRunnableTaskStat, ReadsTheStateAfterTheLastParenthesis) {
  EXPECT_TRUE(IsRunnableTaskStat("4242 (mixrt) R 1 4242 4242 0 -1"));
  EXPECT_FALSE(IsRunnableTaskStat("4242 (mixrt) S 1 4242 4242 0 -1"));
  // A thread may name itself anything, ") R" included.
  EXPECT_FALSE(IsRunnableTaskStat("4242 (evil) R ) S 1 4242"));
  EXPECT_TRUE(IsRunnableTaskStat("4242 (a (b) c) R 1"));
  EXPECT_FALSE(IsRunnableTaskStat("4242 (mixrt)"));
  EXPECT_FALSE(IsRunnableTaskStat(""));
}

TEST(ParseCpuTicks, ReadsEachCpusBusyAndTotalTicks) {
  const auto ticks = ParseCpuTicks(
      "cpu  30 0 10 60 0 0 0 0 0 0\n"
      "cpu0 10 1 2 100 3 4 5 6 0 0\n"
      "cpu2 20 0 8 50 0 0 0 0 0 0\n"
      "intr 7 0 0\n");
  ASSERT_TRUE(ticks.has_value());
  ASSERT_EQ(ticks->size(), 3u);
  // busy = user + nice + system + irq + softirq; total adds idle, iowait
  // and steal.
  EXPECT_EQ((*ticks)[0].busy, 10u + 1 + 2 + 4 + 5);
  EXPECT_EQ((*ticks)[0].total, 22u + 100 + 3 + 6);
  EXPECT_EQ((*ticks)[1].total, 0u);  // cpu1 offline: not listed.
  EXPECT_EQ((*ticks)[2].busy, 28u);
  EXPECT_EQ((*ticks)[2].total, 78u);
}

TEST(ParseCpuTicks, RefusesTextWithoutPerCpuLines) {
  EXPECT_EQ(ParseCpuTicks(""), std::nullopt);
  EXPECT_EQ(ParseCpuTicks("cpu  30 0 10 60 0 0 0 0 0 0\n"), std::nullopt);
  EXPECT_EQ(ParseCpuTicks("cpu0 1 2 3\n"), std::nullopt);
  EXPECT_EQ(ParseCpuTicks("cpu0 a b c d e f g h\n"), std::nullopt);
  EXPECT_EQ(ParseCpuTicks("cpux 1 2 3 4 5 6 7 8\n"), std::nullopt);
}

TEST(OthersBusyCpus, SumsTheSharesOfOurCpusLessOurOwnTime) {
  const std::vector<CpuTicks> before = {{0, 0}, {0, 0}, {0, 0}};
  // CPU 0 fully busy, CPU 1 half, CPU 2 (not ours) fully busy.
  const std::vector<CpuTicks> after = {{10, 10}, {5, 10}, {10, 10}};
  EXPECT_DOUBLE_EQ(OthersBusyCpus(before, after, {0, 1}, 0.0), 1.5);
  EXPECT_DOUBLE_EQ(OthersBusyCpus(before, after, {0, 1}, 1.0), 0.5);
  // Another process busy on a CPU that is not ours takes nothing of ours.
  EXPECT_DOUBLE_EQ(OthersBusyCpus(before, after, {1}, 0.5), 0.0);
  // Never negative (our time and the ticks are read at different instants).
  EXPECT_DOUBLE_EQ(OthersBusyCpus(before, after, {1}, 2.0), 0.0);
  // A CPU missing from either reading, or whose counters went back, counts
  // nothing.
  EXPECT_DOUBLE_EQ(OthersBusyCpus(before, after, {7}, 0.0), 0.0);
  EXPECT_DOUBLE_EQ(OthersBusyCpus(after, before, {0}, 0.0), 0.0);
}

TEST(UseThreadsLeftFree, NeverMoreThreadsThanTheCpusThisProcessMayRunOn) {
  const int cpus = static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN));
  if (cpus < 2 || cpus > 16) GTEST_SKIP() << cpus << " CPUs";
  cpu_set_t saved;
  ASSERT_EQ(sched_getaffinity(0, sizeof(saved), &saved), 0);
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(0, &one);
  ASSERT_EQ(sched_setaffinity(0, sizeof(one), &one), 0);
  setenv(kLoadAwareThreadsEnv, "1", 1);
  // Two threads asked for (MIXRT_NUM_THREADS=2 under taskset -c 0): they
  // would take turns on one CPU, each spinning through the other's slices.
  ConfigureLoadAwareThreads(2);
  UseThreadsLeftFree();
  const int threads = omp_get_max_threads();
  ASSERT_EQ(sched_setaffinity(0, sizeof(saved), &saved), 0);
  EXPECT_EQ(threads, 1);
}

using bench::BusyLoops;

TEST(UseThreadsLeftFree, OneThreadWhileOtherProcessesHoldEveryCore) {
  const int cpus = static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN));
  if (cpus < 2 || cpus > 16) GTEST_SKIP() << cpus << " CPUs";
  setenv(kLoadAwareThreadsEnv, "1", 1);
  ConfigureLoadAwareThreads(cpus);
  const BusyLoops loops(cpus);
  ASSERT_EQ(loops.size(), cpus);
  // The loops are runnable from their first instruction; the kernel's
  // count sees them within a scheduler tick. Several refreshes, each after
  // the interval, so one unlucky read does not decide.
  int threads = cpus;
  for (int attempt = 0; attempt < 20 && threads != 1; ++attempt) {
    std::this_thread::sleep_for(kRefreshInterval +
                                std::chrono::milliseconds(5));
    UseThreadsLeftFree();
    threads = omp_get_max_threads();
  }
  EXPECT_EQ(threads, 1);
}

TEST(UseThreadsLeftFree, TurnedOffKeepsTheConfiguredCount) {
  const int cpus = static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN));
  if (cpus < 2 || cpus > 16) GTEST_SKIP() << cpus << " CPUs";
  setenv(kLoadAwareThreadsEnv, "0", 1);
  ConfigureLoadAwareThreads(cpus);
  omp_set_num_threads(1);  // As another host thread's default might be.
  const BusyLoops loops(cpus);
  std::this_thread::sleep_for(kRefreshInterval + std::chrono::milliseconds(5));
  UseThreadsLeftFree();
  EXPECT_EQ(omp_get_max_threads(), cpus);
}

}  // namespace
}  // namespace mixrt::cpu
