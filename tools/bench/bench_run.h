// Runs a suite: every case on every selected backend, precision and mode,
// checked against the reference plugin on small shapes first, then timed.
#ifndef MIXRT_TOOLS_BENCH_BENCH_RUN_H_
#define MIXRT_TOOLS_BENCH_BENCH_RUN_H_

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "core/plugin/device.h"
#include "tools/bench/bench_stats.h"
#include "tools/bench/bench_suite.h"
#include "tools/bench/bench_timing.h"

namespace mixrt::bench {

// What happened to one (case, backend, precision, mode).
struct CaseResult {
  std::string case_name, kind, where;
  std::map<std::string, int64_t> params;
  std::string backend, device, precision, mode;
  // "ok" (timed), "unsupported" (the backend says so; reason given),
  // "wrong" (the check against the reference failed; not timed), "error".
  std::string status;
  std::string support;  // The capability level: native, slow, unsupported.
  std::string reason;   // The backend's reason, the check's or the error.
  double check_error = 0, check_tolerance = 0;
  Timing timing;
  SampleStats stats;  // Of timing.samples_ms.
  double flops = 0;   // Per step.
  double gflops = 0;  // flops / median.
  double peak_mib = 0;
  int64_t fallback_launches = 0;  // During the timed steps.
  // Of one steady-state step: launches that ran on another backend than
  // the one benchmarked, and the bytes copied to and from it. A row with
  // any is labelled support "fallback", never "native".
  int64_t fallback_launches_per_step = 0;
  int64_t fallback_bytes_per_step = 0;
  std::string reproduce;  // The command that reruns just this.
  int round = 0;          // 1..N in a run of N > 1 rounds (--rounds), else 0.
};

struct RunOptions {
  std::vector<std::string> precisions = {"f32", "bf16", "f16"};
  std::vector<std::string> modes = {"eager"};
  TimingOptions timing;
  // A peer's case (one precision and mode) still running after this many
  // seconds (plus peer_compile_limit_s in a compiled mode) is cut off and
  // reported "peer slower than N s"; 0: the timeout plus 15 s.
  double peer_case_limit_s = 0;
  double peer_compile_limit_s = 120;
  // The command line prefix the reproducers start with.
  std::string command = "mixrt bench";
  std::vector<std::string> suite_paths;
};

// `progress(done, total, line)` after each result; `after_case(c)` once
// the last result of case c is in (the peers' turn when they interleave).
std::vector<CaseResult> RunSuite(
    const std::vector<SuiteCase>& cases, const std::vector<Device>& devices,
    const Device& reference, const RunOptions& options,
    const std::function<void(int, int, const CaseResult&)>& progress,
    const std::function<void(const SuiteCase&)>& after_case = nullptr);

}  // namespace mixrt::bench

#endif  // MIXRT_TOOLS_BENCH_BENCH_RUN_H_
