// conv2d at a ResNet-like shape through mixrt against raw oneDNN calls in
// the same run: one on the same plain NCHW layout mixrt hands oneDNN, one
// letting oneDNN pick blocked layouts (the ceiling, reorders excluded).
//
//   bazel run -c opt //benchmarks:conv_benchmark
#include <cstdio>
#include <string>

#include "benchmark/benchmark.h"
#include "benchmarks/benchmark_support.h"
#include "core/kernels/conv2d.h"
#include "core/tensor/factories.h"
#include "oneapi/dnnl/dnnl.hpp"

namespace mixrt::bench {
namespace {

using namespace ::mixrt::kernels;

// ResNet-50 stage 1: 64 -> 64 channels, 3x3, 56x56, batch 8.
constexpr int64_t kN = 8, kC = 64, kH = 56, kW = 56, kO = 64, kK = 3;

double Flops() { return 2.0 * kN * kO * kH * kW * kC * kK * kK; }

void SetFlops(benchmark::State& state) {
  state.counters["GFLOP/s"] = benchmark::Counter(
      Flops() * state.iterations() / 1e9, benchmark::Counter::kIsRate);
}

void Mixrt(benchmark::State& state, DType dtype) {
  const Device device = CpuDevice();
  auto x = randn({kN, kC, kH, kW}, dtype, device);
  auto w = randn({kO, kC, kK, kK}, dtype, device);
  if (!x.ok() || !w.ok()) {
    state.SkipWithError("allocation failed");
    return;
  }
  Conv2dOptions options;
  options.padding = {1, 1};
  for (auto _ : state) {
    auto y = conv2d(*x, *w, Tensor(), options);
    if (!y.ok()) {
      state.SkipWithError(std::string(y.status().message()).c_str());
      return;
    }
    benchmark::DoNotOptimize(y->data_ptr());
  }
  SetFlops(state);
  ReportPeakMemory(state, device);
}

void RawOneDnn(benchmark::State& state, DType dtype, bool blocked) {
  using dnnl::memory;
  dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  dnnl::stream stream(engine);
  const auto dt =
      dtype == DType::kF32 ? memory::data_type::f32 : memory::data_type::bf16;
  const auto tag = blocked ? memory::format_tag::any : memory::format_tag::nchw;
  const auto wtag =
      blocked ? memory::format_tag::any : memory::format_tag::oihw;
  const memory::desc src({kN, kC, kH, kW}, dt, tag);
  const memory::desc wei({kO, kC, kK, kK}, dt, wtag);
  const memory::desc dst({kN, kO, kH, kW}, dt, tag);
  dnnl::convolution_forward::primitive_desc pd;
  try {
    pd = dnnl::convolution_forward::primitive_desc(
        dnnl::convolution_forward::desc(dnnl::prop_kind::forward_training,
                                        dnnl::algorithm::convolution_direct,
                                        src, wei, dst, {1, 1}, {0, 0}, {1, 1},
                                        {1, 1}),
        engine);
  } catch (const dnnl::error&) {
    state.SkipWithError("oneDNN has no convolution for this dtype here");
    return;
  }
  dnnl::convolution_forward prim(pd);
  memory sm(pd.src_desc(), engine), wm(pd.weights_desc(), engine),
      dm(pd.dst_desc(), engine);
  for (auto _ : state) {
    prim.execute(
        stream,
        {{DNNL_ARG_SRC, sm}, {DNNL_ARG_WEIGHTS, wm}, {DNNL_ARG_DST, dm}});
    stream.wait();
  }
  SetFlops(state);
  state.SetLabel(pd.impl_info_str());
}

}  // namespace
}  // namespace mixrt::bench

int main(int argc, char** argv) {
  using mixrt::DType;
  using namespace mixrt::bench;
  benchmark::Initialize(&argc, argv);
  LoadPlugins(argv[0]);
  for (DType dtype : {DType::kF32, DType::kBF16, DType::kF16}) {
    const std::string name(mixrt::DTypeName(dtype));
    benchmark::RegisterBenchmark(("mixrt/" + name).c_str(), Mixrt, dtype)
        ->Unit(benchmark::kMillisecond)
        ->UseRealTime()
        ->MinTime(1.0);
    if (dtype == DType::kF16) continue;  // oneDNN 2.6 has no f16 conv.
    benchmark::RegisterBenchmark(("onednn_nchw/" + name).c_str(), RawOneDnn,
                                 dtype, false)
        ->Unit(benchmark::kMillisecond)
        ->UseRealTime()
        ->MinTime(1.0);
    benchmark::RegisterBenchmark(("onednn_blocked/" + name).c_str(), RawOneDnn,
                                 dtype, true)
        ->Unit(benchmark::kMillisecond)
        ->UseRealTime()
        ->MinTime(1.0);
  }
  RateCollector rates("GFLOP/s");
  benchmark::RunSpecifiedBenchmarks(&rates);
  std::printf("\nRatios (same run, GFLOP/s):\n");
  for (const char* d : {"f32", "bf16"}) {
    const double m = rates.Get(std::string("mixrt/") + d);
    const double plain = rates.Get(std::string("onednn_nchw/") + d);
    const double blocked = rates.Get(std::string("onednn_blocked/") + d);
    if (m > 0 && plain > 0 && blocked > 0) {
      std::printf(
          "  %-4s mixrt %6.1f  raw nchw %6.1f (overhead %+.1f%%)  raw blocked "
          "%6.1f (mixrt at %.0f%%)\n",
          d, m, plain, 100 * (plain / m - 1), blocked, 100 * m / blocked);
    }
  }
  const double f32 = rates.Get("mixrt/f32");
  if (f32 > 0) {
    std::printf("  bf16/f32 %.2fx  f16/f32 %.2fx\n",
                rates.Get("mixrt/bf16") / f32, rates.Get("mixrt/f16") / f32);
  }
  benchmark::Shutdown();
  return 0;
}
