// Shared pieces of the benchmarks: the CPU device, a reporter that keeps a
// rate counter per benchmark for ratio tables, and peak tensor memory.
#ifndef MIXRT_BENCHMARKS_BENCHMARK_SUPPORT_H_
#define MIXRT_BENCHMARKS_BENCHMARK_SUPPORT_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "benchmark/benchmark.h"
#include "core/plugin/device.h"

namespace mixrt::bench {

// Loads the plugins bundled with the benchmark binary; call from main.
void LoadPlugins(const char* argv0);
// The CPU plugin's device.
Device CpuDevice();

// One GEMM problem: out [m, n] = x [m, k] @ w^T.
struct GemmShape {
  const char* name;
  int64_t m, k, n;
};

// Adds the GFLOP/s rate counter of `state.iterations()` GEMMs of shape `s`.
void SetGemmFlops(benchmark::State& state, const GemmShape& s);

// Adds the device's peak tensor memory (MiB) as a counter.
void ReportPeakMemory(benchmark::State& state, const Device& device);

// Prints like the console reporter and remembers one counter per run name.
class RateCollector : public benchmark::ConsoleReporter {
 public:
  explicit RateCollector(std::string counter) : counter_(std::move(counter)) {}
  void ReportRuns(const std::vector<Run>& runs) override;
  double Get(const std::string& name) const;  // 0 when absent.

 private:
  std::string counter_;
  std::map<std::string, double> rates_;
};

}  // namespace mixrt::bench

#endif  // MIXRT_BENCHMARKS_BENCHMARK_SUPPORT_H_
