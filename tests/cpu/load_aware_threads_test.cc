#include "backends/cpu/capability/load_aware_threads.h"

#include <omp.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <thread>

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
