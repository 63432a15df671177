// Running another program without a shell and under a time limit: its
// arguments are passed as they are (a quote in a file name is a quote, not
// a shell command), and a program that never finishes is killed with
// everything it started.
#ifndef MIXRT_COMMON_RUN_PROGRAM_H_
#define MIXRT_COMMON_RUN_PROGRAM_H_

#include <string>
#include <vector>

namespace mixrt::files {

struct ProgramResult {
  int exit_code = -1;  // -1: it did not start, was killed or crashed.
  bool started = false;
  bool timed_out = false;  // Killed after the time limit.
};

// Where output goes to be discarded (RunProgram's `log`).
inline constexpr char kDiscardOutput[] = "/dev/null";

// Runs argv[0] (searched on PATH when it has no slash) with argv, in a
// process group of its own, killed (the whole group) after
// `timeout_seconds`. With `log`, its stdout and stderr go to that file,
// created exclusively (O_EXCL|O_NOFOLLOW, mode 0600), or are discarded
// (kDiscardOutput); without, they are this process's.
ProgramResult RunProgram(const std::vector<std::string>& argv,
                         double timeout_seconds, const std::string& log = "");

}  // namespace mixrt::files

#endif  // MIXRT_COMMON_RUN_PROGRAM_H_
