// What running the CPU plugin out of process (core/plugin/isolated_plugin.h)
// costs against running it in process, in the same run: one launch's round
// trip (a + b on one element), the tiny MLP's training step (width 64,
// batch 32) and the seed recipe's (3 x Linear(4096) + ReLU, batch 512, MSE,
// SGD; f32 and bf16 autocast). Prints each pair's ratio and peak memory.
//   bazel run -c opt //benchmarks:isolation_benchmark
#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "benchmark/benchmark.h"
#include "benchmarks/benchmark_support.h"
#include "core/amp/autocast/autocast.h"
#include "core/bundled/bundled_plugins.h"
#include "core/functional/ops.h"
#include "core/nn/module.h"
#include "core/optim/optimizer.h"
#include "core/plugin/registry.h"
#include "core/tensor/factories.h"
#include "core/tensor/generator.h"
#include "mixrt/status_macros.h"

namespace mixrt::bench {
namespace {

Device g_in_process;
Device g_isolated;

const Device& Pick(int isolated) {
  return isolated ? g_isolated : g_in_process;
}

void BM_LaunchRoundTrip(benchmark::State& state) {
  const Device& device = Pick(state.range(0));
  const Tensor a = *ones({1}, DType::kF32, device);
  const Tensor b = *ones({1}, DType::kF32, device);
  for (auto _ : state) {
    absl::StatusOr<Tensor> c = add(a, b);
    if (!c.ok()) {
      state.SkipWithError(std::string(c.status().message()).c_str());
      return;
    }
    benchmark::DoNotOptimize(c->data_ptr());
  }
  state.SetLabel(state.range(0) ? "out of process" : "in process");
}

// One SGD step of an MLP of `layers` Linear(width) + ReLU on a batch.
void TrainSteps(benchmark::State& state, int64_t width, int64_t batch,
                int layers, bool autocast) {
  const Device& device = Pick(state.range(0));
  Generator init(0);
  std::vector<int64_t> sizes(layers + 1, width);
  absl::StatusOr<std::shared_ptr<nn::Sequential>> net =
      nn::MLP(sizes, device, &init);
  if (!net.ok()) {
    state.SkipWithError(std::string(net.status().message()).c_str());
    return;
  }
  SGD opt((*net)->parameters(), {.lr = 0.001});
  const Tensor x = *randn({batch, width}, DType::kF32, device);
  const Tensor y = *randn({batch, width}, DType::kF32, device);
  const auto step = [&]() -> absl::Status {
    Tensor loss;
    {
      AutocastGuard guard(device.type(),
                          AutocastOptions{DType::kBF16, false, autocast, true});
      MIXRT_ASSIGN_OR_RETURN(Tensor out, (*net)->forward(x));
      MIXRT_ASSIGN_OR_RETURN(loss, mse_loss(out, y));
    }
    MIXRT_RETURN_IF_ERROR(loss.backward());
    MIXRT_RETURN_IF_ERROR(opt.step());
    opt.zero_grad();
    return device.backend()->Synchronize(device.index());
  };
  if (absl::Status s = step(); !s.ok()) {  // Warm-up: packs, caches.
    state.SkipWithError(std::string(s.message()).c_str());
    return;
  }
  device.backend()->allocator(device.index()).ResetPeak();
  for (auto _ : state) {
    if (absl::Status s = step(); !s.ok()) {
      state.SkipWithError(std::string(s.message()).c_str());
      return;
    }
  }
  state.SetLabel(state.range(0) ? "out of process" : "in process");
  ReportPeakMemory(state, device);
}

void BM_TinyMlpStep(benchmark::State& state) {
  TrainSteps(state, 64, 32, 2, /*autocast=*/false);
}
void BM_RecipeStepF32(benchmark::State& state) {
  TrainSteps(state, 4096, 512, 3, /*autocast=*/false);
}
void BM_RecipeStepBf16(benchmark::State& state) {
  TrainSteps(state, 4096, 512, 3, /*autocast=*/true);
}

// In process, then out of process, for each case (range 0 / 1).
BENCHMARK(BM_LaunchRoundTrip)->Arg(0)->Arg(1)->UseRealTime();
BENCHMARK(BM_TinyMlpStep)->Arg(0)->Arg(1)->UseRealTime();
BENCHMARK(BM_RecipeStepF32)
    ->Arg(0)
    ->Arg(1)
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond)
    ->MinTime(2.0);
BENCHMARK(BM_RecipeStepBf16)
    ->Arg(0)
    ->Arg(1)
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond)
    ->MinTime(2.0);

// Seconds per iteration, by benchmark and argument ("BM_TinyMlpStep/1").
class TimeCollector : public benchmark::ConsoleReporter {
 public:
  void ReportRuns(const std::vector<Run>& runs) override {
    ConsoleReporter::ReportRuns(runs);
    for (const Run& r : runs) {
      if (r.error_occurred || r.iterations == 0) continue;
      // The name up to the argument: "BM_RecipeStepF32/1/min_time:2.000/..."
      const std::string name = r.benchmark_name();
      const size_t slash = name.find('/', name.find('/') + 1);
      times_[name.substr(0, slash)] =
          r.real_accumulated_time / static_cast<double>(r.iterations);
    }
  }
  double Get(const std::string& name) const {
    auto it = times_.find(name);
    return it == times_.end() ? 0 : it->second;
  }

 private:
  std::map<std::string, double> times_;
};

}  // namespace
}  // namespace mixrt::bench

int main(int argc, char** argv) {
  using namespace mixrt;
  bench::LoadPlugins(argv[0]);
  bench::g_in_process = bench::CpuDevice();
  // The same plugin file again, out of process, in a registry of its own
  // (one registry holds one backend per name).
  static Registry* isolated = new Registry();
  LoadOptions options;
  options.isolation = "cpu";
  absl::StatusOr<const Backend*> backend =
      isolated->Load(BundledPluginPath(argv[0], "cpu"), options);
  if (!backend.ok()) {
    std::fprintf(stderr, "isolation_benchmark: %s\n",
                 std::string(backend.status().message()).c_str());
    return 1;
  }
  bench::g_isolated = Device(*backend, 0);
  benchmark::Initialize(&argc, argv);
  bench::TimeCollector collector;
  benchmark::RunSpecifiedBenchmarks(&collector);
  std::printf("\nout of process / in process, time per iteration:\n");
  for (const char* name : {"BM_LaunchRoundTrip", "BM_TinyMlpStep",
                           "BM_RecipeStepF32", "BM_RecipeStepBf16"}) {
    const double in = collector.Get(std::string(name) + "/0");
    const double out = collector.Get(std::string(name) + "/1");
    if (in > 0 && out > 0) {
      std::printf("  %-20s %.3fx (%+.2f us)\n", name, out / in,
                  (out - in) * 1e6);
    }
  }
  benchmark::Shutdown();
  return 0;
}
