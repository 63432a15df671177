// What each suite case kind runs: one timed step on a device in a precision
// and mode, its FLOPs, and the values a small-shape run checks against the
// reference plugin before anything is timed.
#ifndef MIXRT_TOOLS_BENCH_BENCH_CASES_H_
#define MIXRT_TOOLS_BENCH_BENCH_CASES_H_

#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/plugin/device.h"
#include "mixrt/plugin_api.h"
#include "tools/bench/bench_suite.h"

namespace mixrt::bench {

// Precisions: "f32", "bf16", "f16" (operands in that dtype for op kinds;
// autocast to it, with a GradScaler when training, for model kinds) and
// "auto" (autocast's auto precision; model kinds only).
// Modes: "eager", and for model kinds the mixrt::compile modes
// ("default", "reduce-overhead", ...).

struct Workload {
  std::function<absl::Status()> step;  // One step, synchronized.
  double flops = 0;                    // Per step; 0 where undefined.
};

// The op class whose capability decides whether a precision runs.
MixrtOpClass CaseOpClass(const std::string& kind);
bool IsModelKind(const std::string& kind);
// Whether `precision` / `mode` apply to `kind` ("auto" and compile modes
// are for model kinds).
bool Applies(const std::string& kind, const std::string& precision,
             const std::string& mode);

absl::StatusOr<Workload> MakeWorkload(const SuiteCase& c, const Device& device,
                                      const std::string& precision,
                                      const std::string& mode);

// The case shrunk to small shapes (every size capped) for checking.
SuiteCase SmallShapes(const SuiteCase& c);
// The values one run of `c` produces (outputs; for training, the losses of
// two steps), identical inputs and weights on every device.
absl::StatusOr<std::vector<double>> CheckValues(const SuiteCase& c,
                                                const Device& device,
                                                const std::string& precision,
                                                const std::string& mode);
// Normwise relative tolerance of a check in `precision`: a few roundings
// of its unit roundoff (bf16 2^-8, f16 2^-11), f32 summation order.
double CheckTolerance(const std::string& precision);

}  // namespace mixrt::bench

#endif  // MIXRT_TOOLS_BENCH_BENCH_CASES_H_
