// The elementwise ops of an AMP training step through mixrt (core -> ABI ->
// CPU plugin), at the recipe MLP's activation and weight sizes (batch 512,
// width 1024): what a bf16 step spends outside its GEMMs, with the bias
// gradient's two ways in the same run (widen to f32 then sum, the old
// path; sum straight into f32) for their ratio.
//   bazel run //benchmarks:pointwise_benchmark
#include <string>

#include "absl/status/statusor.h"
#include "benchmark/benchmark.h"
#include "benchmarks/benchmark_support.h"
#include "core/functional/ops.h"
#include "core/kernels/reduce.h"
#include "core/tensor/factories.h"
#include "mixrt/status_macros.h"

namespace mixrt::bench {
namespace {

const Device& Cpu();

template <typename Op>
void Run(benchmark::State& state, Op&& op) {
  for (auto _ : state) {
    absl::StatusOr<Tensor> y = op();
    if (!y.ok()) {
      state.SkipWithError(std::string(y.status().message()).c_str());
      return;
    }
    benchmark::DoNotOptimize(y->data_ptr());
  }
  ReportPeakMemory(state, Cpu());
}

const Device& Cpu() {
  static const Device device = CpuDevice();
  return device;
}

Tensor Random(Shape shape, DType dtype) { return *randn(shape, dtype, Cpu()); }

void BM_SubF32(benchmark::State& state) {
  const Tensor a = Random({512, 1024}, DType::kF32);
  const Tensor b = Random({512, 1024}, DType::kF32);
  Run(state, [&] { return sub(a, b); });
}
void BM_Bf16ToF32(benchmark::State& state) {
  const Tensor a = Random({512, 1024}, DType::kBF16);
  Run(state, [&] { return a.to(DType::kF32); });
}
void BM_WeightF32ToBf16(benchmark::State& state) {
  const Tensor w = Random({1024, 1024}, DType::kF32);
  Run(state, [&] { return w.to(DType::kBF16); });
}
void BM_ReluBf16(benchmark::State& state) {
  const Tensor a = Random({512, 1024}, DType::kBF16);
  Run(state, [&] { return relu(a); });
}
void BM_BiasGradWidenThenSum(benchmark::State& state) {
  const Tensor g = Random({512, 1024}, DType::kBF16);
  Run(state, [&]() -> absl::StatusOr<Tensor> {
    MIXRT_ASSIGN_OR_RETURN(Tensor wide, g.to(DType::kF32));
    return sum(wide, {0});
  });
}
void BM_BiasGradSumIntoF32(benchmark::State& state) {
  const Tensor g = Random({512, 1024}, DType::kBF16);
  // What LinearBackward calls (the autograd-free kernel).
  Run(state,
      [&] { return kernels::sum(g, {0}, /*keepdim=*/false, DType::kF32); });
}
void BM_MseLossF32(benchmark::State& state) {
  const Tensor a = Random({512, 1024}, DType::kF32);
  const Tensor b = Random({512, 1024}, DType::kF32);
  Run(state, [&] { return mse_loss(a, b); });
}

BENCHMARK(BM_SubF32)->UseRealTime();
BENCHMARK(BM_Bf16ToF32)->UseRealTime();
BENCHMARK(BM_WeightF32ToBf16)->UseRealTime();
BENCHMARK(BM_ReluBf16)->UseRealTime();
BENCHMARK(BM_BiasGradWidenThenSum)->UseRealTime();
BENCHMARK(BM_BiasGradSumIntoF32)->UseRealTime();
BENCHMARK(BM_MseLossF32)->UseRealTime();

}  // namespace
}  // namespace mixrt::bench

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  mixrt::bench::LoadPlugins(argv[0]);
  benchmark::RunSpecifiedBenchmarks();
  return 0;
}
