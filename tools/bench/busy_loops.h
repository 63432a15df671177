// Busy loops in child processes: the competing work of a machine shared
// with a build or another job, for benchmark cases that measure how a
// backend behaves when it does not have every core (`busy_cores=N`).
#ifndef MIXRT_TOOLS_BENCH_BUSY_LOOPS_H_
#define MIXRT_TOOLS_BENCH_BUSY_LOOPS_H_

#include <sys/types.h>

#include <vector>

namespace mixrt::bench {

// Starts `count` processes that spin until this object is destroyed (or
// this process dies: they are killed with it). Fewer start if fork fails.
class BusyLoops {
 public:
  explicit BusyLoops(int count);
  ~BusyLoops();
  BusyLoops(const BusyLoops&) = delete;
  BusyLoops& operator=(const BusyLoops&) = delete;

  int size() const { return static_cast<int>(pids_.size()); }

 private:
  std::vector<pid_t> pids_;
};

}  // namespace mixrt::bench

#endif  // MIXRT_TOOLS_BENCH_BUSY_LOOPS_H_
