#include "tools/bench/busy_loops.h"

#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

namespace mixrt::bench {

BusyLoops::BusyLoops(int count) {
  const pid_t parent = getpid();
  for (int i = 0; i < count; ++i) {
    const pid_t pid = fork();
    if (pid == 0) {
      // Only async-signal-safe calls after fork in a threaded process.
      prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (getppid() != parent) _exit(0);  // It died before prctl.
      volatile unsigned spin = 0;
      while (true) spin = spin + 1;
    }
    if (pid > 0) pids_.push_back(pid);
  }
}

BusyLoops::~BusyLoops() {
  for (const pid_t pid : pids_) kill(pid, SIGKILL);
  for (const pid_t pid : pids_) waitpid(pid, nullptr, 0);
}

}  // namespace mixrt::bench
