// GEMM on the first GPU backend with a device (cuda, then rocm), f32 vs f16
// vs bf16 in the same run, with the device synchronized every iteration.
// Prints GFLOP/s per case, the f16/f32 and bf16/f32 ratios, and peak tensor
// memory. On a machine without a GPU it says why and does nothing else.
//
//   bazel run //benchmarks:gpu_gemm_benchmark
//   MIXRT_FLOAT32_MATMUL_PRECISION=high bazel run ...   # f32 through TF32
#include <cstdio>
#include <string>

#include "absl/status/status.h"
#include "benchmark/benchmark.h"
#include "benchmarks/benchmark_support.h"
#include "core/kernels/matmul.h"
#include "core/plugin/registry.h"
#include "core/tensor/factories.h"

namespace mixrt::bench {
namespace {

using namespace ::mixrt::kernels;

using Shape = GemmShape;
constexpr Shape kShapes[] = {
    {"4096x4096x4096", 4096, 4096, 4096},
    {"512x4096x4096", 512, 4096, 4096},
    {"16x4096x4096", 16, 4096, 4096},
};

void Linear(benchmark::State& state, Device device, Shape s, DType dtype) {
  auto x = randn({s.m, s.k}, dtype, device);
  auto w = randn({s.n, s.k}, dtype, device);
  if (!x.ok() || !w.ok()) {
    state.SkipWithError("allocation failed");
    return;
  }
  for (auto _ : state) {
    auto y = linear(*x, *w, Tensor(), MatmulOptions());
    absl::Status synced =
        y.ok() ? device.backend()->Synchronize(device.index()) : y.status();
    if (!synced.ok()) {
      state.SkipWithError(std::string(synced.message()).c_str());
      return;
    }
  }
  SetGemmFlops(state, s);
  ReportPeakMemory(state, device);
}

}  // namespace
}  // namespace mixrt::bench

int main(int argc, char** argv) {
  using namespace mixrt::bench;
  benchmark::Initialize(&argc, argv);
  LoadPlugins(argv[0]);
  mixrt::Device device;
  std::string reasons;
  for (const char* name : {"cuda", "rocm"}) {
    auto d = mixrt::Registry::Global().SelectDevice(name);
    if (d.ok()) {
      device = *d;
      break;
    }
    reasons += std::string("\n  ") + std::string(d.status().message());
  }
  if (!device.valid()) {
    std::printf("gpu_gemm_benchmark: skipped: no GPU backend has a device:%s\n",
                reasons.c_str());
    return 0;
  }
  std::printf("device: %s (%s)\n", device.ToString().c_str(),
              device.info().name.c_str());
  for (const Shape& s : kShapes) {
    for (mixrt::DType dtype :
         {mixrt::DType::kF32, mixrt::DType::kF16, mixrt::DType::kBF16}) {
      benchmark::RegisterBenchmark(
          (std::string(s.name) + "/" + std::string(DTypeName(dtype))).c_str(),
          Linear, device, s, dtype)
          ->Unit(benchmark::kMillisecond)
          ->UseRealTime()
          ->MinTime(0.5);
    }
  }
  RateCollector rates("GFLOP/s");
  benchmark::RunSpecifiedBenchmarks(&rates);
  std::printf("\nRatios (same run, GFLOP/s):\n");
  for (const Shape& s : kShapes) {
    const std::string n = s.name;
    const double f32 = rates.Get(n + "/f32");
    if (f32 > 0) {
      std::printf("  %-16s f16/f32 %.2fx  bf16/f32 %.2fx\n", s.name,
                  rates.Get(n + "/f16") / f32, rates.Get(n + "/bf16") / f32);
    }
  }
  benchmark::Shutdown();
  return 0;
}
