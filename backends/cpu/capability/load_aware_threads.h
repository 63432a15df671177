// How many threads the plugin's next op uses when other processes load the
// machine: the cores they leave free, at least one, at most the configured
// count (MIXRT_NUM_THREADS, else OpenMP's default).
//
// Why: libgomp's threads spin about 3 ms at a barrier before they sleep
// (its default wait policy). When another process holds a core, one member
// of a team waits for a time slice while its partner spins through its own,
// so every parallel region costs scheduler slices (milliseconds) instead of
// microseconds. Measured on 2 cores with two busy loops beside: a 32 x 128
// MLP train step went from 0.19 ms to 92 ms (one thread: 0.35 ms), a 2 x 16
// x 16 x 16 convolution from 0.04 to 32 ms. OMP_WAIT_POLICY=passive avoids
// the collapse but makes every idle small op 2-3x slower (each region wakes
// a sleeping thread), so the plugin keeps libgomp's spinning and instead
// leaves the cores that other processes use to them.
//
// The count is re-read at most every kRefreshInterval from the kernel's
// count of runnable threads (/proc/loadavg) less this process's own
// (/proc/self/task/*/stat); other processes count when two readings in a
// row see them (an instant's kernel worker does not).
//
// A process confined to some of the machine's CPUs (taskset, a container's
// cpuset, a job scheduler's binding) has only those: never more threads
// than it may run on, and other processes count only as far as they use
// them. The runnable count does not say where a thread runs, so for a
// confined process it is capped by the CPU time that others used on its
// CPUs over the last kCpuShareWindow (/proc/stat per CPU, less this
// process's own CPU time). Seen on a 16-CPU Xeon with the bench pinned to 2:
// a 32 x 128 MLP train step beside one busy loop took 72 ms instead of
// 0.27 (both threads kept: 15 of 16 CPUs looked free).
// MIXRT_CPU_LOAD_AWARE_THREADS=0 turns it off: a fixed thread count gives
// bit-identical results from run to run, which a changing one (another split of
// a reduction) need not.
#ifndef MIXRT_BACKENDS_CPU_CAPABILITY_LOAD_AWARE_THREADS_H_
#define MIXRT_BACKENDS_CPU_CAPABILITY_LOAD_AWARE_THREADS_H_

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string_view>
#include <vector>

#include "plugins/sdk/fusion.h"

namespace mixrt::cpu {

inline constexpr char kLoadAwareThreadsEnv[] = "MIXRT_CPU_LOAD_AWARE_THREADS";
inline constexpr std::chrono::milliseconds kRefreshInterval{20};
// /proc/stat counts in ticks (10 ms): a share over fewer would be noise.
inline constexpr std::chrono::milliseconds kCpuShareWindow{100};

// The runnable threads of other processes: the system's less this
// process's (never negative: the two are read at different instants).
int OtherProcessesRunnable(int system_runnable, int own_runnable);

// The threads to use: `configured`, less the cores that `others` runnable
// threads of other processes take from the `cpus` this process may run
// on; never below one.
int ThreadsLeftFree(int configured, int cpus, int others);

// One CPU's time in /proc/stat, in ticks: busy (user, nice, system, irq,
// softirq) and in all (those, idle, iowait and steal).
struct CpuTicks {
  uint64_t busy = 0;
  uint64_t total = 0;
};

// The per-CPU lines of /proc/stat ("cpu3 user nice system idle iowait irq
// softirq steal ..."), indexed by CPU number (a CPU not listed, offline,
// stays zero); nullopt when no per-CPU line parses.
std::optional<std::vector<CpuTicks>> ParseCpuTicks(std::string_view proc_stat);

// The CPUs' worth of time that other processes used on `cpus` between two
// readings: the busy share of each, summed, less `own_cpus` (this
// process's CPU time over the same wall time); never negative.
double OthersBusyCpus(const std::vector<CpuTicks>& before,
                      const std::vector<CpuTicks>& after,
                      const std::vector<int>& cpus, double own_cpus);

// The runnable count of /proc/loadavg ("0.50 0.40 0.30 3/166 9782" -> 3);
// nullopt for anything else.
std::optional<int> ParseRunnableFromLoadavg(std::string_view text);

// Whether a /proc/<pid>/task/<tid>/stat line is of a runnable thread: its
// state is the field after the last ')' (the name may hold spaces and
// parentheses).
bool IsRunnableTaskStat(std::string_view stat);

// Records the thread count the plugin was configured with (call once at
// initialization, after MIXRT_NUM_THREADS is applied) and whether load
// awareness is on (kLoadAwareThreadsEnv).
void ConfigureLoadAwareThreads(int configured);

// Sets the calling thread's OpenMP thread count for the op it is about to
// run (re-reading the load when kRefreshInterval has passed).
void UseThreadsLeftFree();

// `kernel`, calling UseThreadsLeftFree before each run.
std::unique_ptr<sdk::FusedKernel> RunOnThreadsLeftFree(
    std::unique_ptr<sdk::FusedKernel> kernel);

}  // namespace mixrt::cpu

#endif  // MIXRT_BACKENDS_CPU_CAPABILITY_LOAD_AWARE_THREADS_H_
