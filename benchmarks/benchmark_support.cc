#include "benchmarks/benchmark_support.h"

#include <cstdio>
#include <cstdlib>

#include "absl/status/statusor.h"
#include "core/allocator/caching_allocator.h"
#include "core/bundled/bundled_plugins.h"
#include "core/plugin/registry.h"

namespace mixrt::bench {

void LoadPlugins(const char* argv0) {
  Registry::Global().LoadAll(BundledPluginPaths(argv0));
}

Device CpuDevice() {
  static const Device device = [] {
    absl::StatusOr<Device> d = Registry::Global().SelectDevice("cpu");
    if (!d.ok()) {
      std::fprintf(stderr, "no cpu backend: %s\n",
                   std::string(d.status().message()).c_str());
      std::exit(1);
    }
    return *d;
  }();
  return device;
}

void SetGemmFlops(benchmark::State& state, const GemmShape& s) {
  state.counters["GFLOP/s"] =
      benchmark::Counter(2.0 * s.m * s.n * s.k * state.iterations() / 1e9,
                         benchmark::Counter::kIsRate);
}

void ReportPeakMemory(benchmark::State& state, const Device& device) {
  state.counters["peak_MiB"] =
      device.backend()->allocator(device.index()).stats().peak_bytes_in_use /
      1048576.0;
}

void RateCollector::ReportRuns(const std::vector<Run>& runs) {
  for (const Run& run : runs) {
    auto it = run.counters.find(counter_);
    if (it != run.counters.end() && !run.error_occurred) {
      // "mixrt/512x4096x4096/f32/min_time:0.500/real_time" -> the part
      // before the options.
      std::string name = run.benchmark_name();
      const size_t options = name.find("/min_time");
      if (options != std::string::npos) name.resize(options);
      rates_[name] = it->second.value;
    }
  }
  ConsoleReporter::ReportRuns(runs);
}

double RateCollector::Get(const std::string& name) const {
  auto it = rates_.find(name);
  return it == rates_.end() ? 0.0 : it->second;
}

}  // namespace mixrt::bench
