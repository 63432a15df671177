#include "tools/bench/bench_run.h"

#include <algorithm>
#include <cmath>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "core/amp/autocast/autocast.h"
#include "core/tensor/op_fallback.h"
#include "tools/bench/bench_cases.h"
#include "tools/bench/busy_loops.h"

namespace mixrt::bench {
namespace {

// max |got - want| / max |want|: normwise, so cancellation in one element
// does not fail a correct kernel.
double NormwiseError(const std::vector<double>& got,
                     const std::vector<double>& want) {
  if (got.size() != want.size()) return INFINITY;
  double diff = 0, scale = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    if (std::isnan(got[i]) != std::isnan(want[i])) return INFINITY;
    if (std::isnan(want[i])) continue;
    diff = std::max(diff, std::fabs(got[i] - want[i]));
    scale = std::max(scale, std::fabs(want[i]));
  }
  return diff / std::max(scale, 1e-30);
}

std::string Reproducer(const RunOptions& options, const SuiteCase& c,
                       const std::string& backend, const std::string& precision,
                       const std::string& mode) {
  std::string suites;
  for (const std::string& s : options.suite_paths) {
    absl::StrAppend(&suites, " --suite=", s);
  }
  return absl::StrCat(options.command, suites, " --cases=", c.name,
                      " --backend=", backend, " --dtype=", precision,
                      " --mode=", mode);
}

// What one more step sends to another backend. The support level said
// what the backend claims for the case's op class; a step that falls back
// is not what that claim timed, so the row says "fallback", with how much.
void NoteFallbackOfOneStep(const std::function<absl::Status()>& step,
                           CaseResult* r) {
  const FallbackCounters before = GetFallbackCounters();
  if (!step().ok()) return;  // The timed steps succeeded; nothing to add.
  const FallbackCounters after = GetFallbackCounters();
  r->fallback_launches_per_step = after.launches - before.launches;
  r->fallback_bytes_per_step = after.bytes_copied - before.bytes_copied;
  if (r->fallback_launches_per_step == 0) return;
  r->support = "fallback";
  r->reason = absl::StrCat(
      r->fallback_launches_per_step,
      " launches per step ran on another backend (",
      absl::StrFormat("%.2f", r->fallback_bytes_per_step / 1048576.0),
      " MiB copied per step); `mixrt bench` lists which "
      "ops on stderr");
}

void RunOne(const SuiteCase& c, const Device& device, const Device& reference,
            const std::string& precision, const std::string& mode,
            const RunOptions& options, CaseResult* r) {
  // The precision's support, as the backend reports it.
  if (precision != "auto") {
    const DType dtype = *ParseDType(precision);
    const CapabilityEntry& cap =
        device.info().capability(CaseOpClass(c.kind), dtype);
    r->support = std::string(SupportLevelName(cap.level));
    r->reason = cap.reason;
    if (cap.level == MIXRT_SUPPORT_UNSUPPORTED) {
      r->status = "unsupported";
      return;
    }
  } else {
    const PrecisionChoice choice = AutoPrecision(device, CaseOpClass(c.kind));
    r->support = absl::StrCat("auto: ", DTypeName(choice.dtype));
    r->reason = choice.reason;
  }
  // Started before the check and the warm-up: the values are checked as
  // the load leaves the backend (threads that follow it included), and a
  // backend that adapts has seen it by the timed steps.
  const BusyLoops busy(static_cast<int>(c.param("busy_cores")));
  // Correct first: small shapes against the reference plugin.
  const SuiteCase small = SmallShapes(c);
  absl::StatusOr<std::vector<double>> got =
      CheckValues(small, device, precision, mode);
  absl::StatusOr<std::vector<double>> want =
      CheckValues(small, reference, precision, "eager");
  if (!got.ok() || !want.ok()) {
    r->status = "error";
    r->reason = std::string(got.ok() ? want.status().message()
                                     : got.status().message());
    return;
  }
  r->check_error = NormwiseError(*got, *want);
  r->check_tolerance = CheckTolerance(precision);
  if (!(r->check_error <= r->check_tolerance)) {
    r->status = "wrong";
    r->reason = absl::StrCat("differs from the reference plugin by ",
                             r->check_error, " (normwise; allowed ",
                             r->check_tolerance, ") on small shapes");
    return;
  }
  absl::StatusOr<Workload> w = MakeWorkload(c, device, precision, mode);
  if (!w.ok()) {
    r->status = "error";
    r->reason = std::string(w.status().message());
    return;
  }
  r->flops = w->flops;
  CachingAllocator& allocator = device.backend()->allocator(device.index());
  // The first step (tracing, for compiled modes) is the warm-up's; the peak
  // is the steady state's.
  absl::Status first = w->step();
  allocator.ResetPeak();
  const int64_t fallbacks_before = GetFallbackCounters().launches;
  absl::StatusOr<Timing> t =
      first.ok() ? TimeSteps(w->step, options.timing) : first;
  if (!t.ok()) {
    r->status = "error";
    r->reason = std::string(t.status().message());
    return;
  }
  r->status = "ok";
  r->timing = *t;
  r->stats = Summarize(t->samples_ms);
  r->gflops = r->flops > 0 && r->stats.median > 0
                  ? r->flops / (r->stats.median * 1e6)
                  : 0;
  r->peak_mib = allocator.stats().peak_bytes_in_use / 1048576.0;
  r->fallback_launches = GetFallbackCounters().launches - fallbacks_before;
  NoteFallbackOfOneStep(w->step, r);
}

}  // namespace

std::vector<CaseResult> RunSuite(
    const std::vector<SuiteCase>& cases, const std::vector<Device>& devices,
    const Device& reference, const RunOptions& options,
    const std::function<void(int, int, const CaseResult&)>& progress,
    const std::function<void(const SuiteCase&)>& after_case) {
  struct Job {
    const SuiteCase* c;
    Device device;
    std::string precision, mode;
  };
  std::vector<Job> jobs;
  for (const SuiteCase& c : cases) {
    for (const Device& device : devices) {
      for (const std::string& precision : options.precisions) {
        for (const std::string& mode : options.modes) {
          if (Applies(c.kind, precision, mode)) {
            jobs.push_back({&c, device, precision, mode});
          }
        }
      }
    }
  }
  std::vector<CaseResult> results;
  for (size_t j = 0; j < jobs.size(); ++j) {
    const Job& job = jobs[j];
    CaseResult r;
    r.case_name = job.c->name;
    r.kind = job.c->kind;
    r.where = job.c->where;
    r.params = job.c->params;
    r.backend = job.device.backend()->name();
    r.device = job.device.info().name;
    r.precision = job.precision;
    r.mode = job.mode;
    r.reproduce =
        Reproducer(options, *job.c, r.backend, job.precision, job.mode);
    RunOne(*job.c, job.device, reference, job.precision, job.mode, options, &r);
    results.push_back(std::move(r));
    if (progress) {
      progress(static_cast<int>(results.size()), static_cast<int>(jobs.size()),
               results.back());
    }
    // Jobs are in case order: the next job starts another case, or none.
    if (after_case && (j + 1 == jobs.size() || jobs[j + 1].c != job.c)) {
      after_case(*job.c);
    }
  }
  return results;
}

}  // namespace mixrt::bench
