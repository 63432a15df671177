// GEMM through mixrt (core -> ABI -> CPU plugin -> oneDNN) against a raw
// oneDNN call of the same shape and dtype in the same run, f32 vs bf16 vs
// f16. Prints GFLOP/s per case and, at the end, the ratios that matter:
// plugin overhead over raw oneDNN (target < 3%), bf16 / f32 and f16 / f32.
// Then Linear weight gradients (dy^T x, f32): through mixrt, whose plugin
// copies operands into the layouts oneDNN's AVX2 gemm runs fast
// (backends/cpu/kernels/operand_copies.h), against raw oneDNN on the
// layouts as given: above 1x, the copies win (about 1x where they are
// not made: AVX-512 kinds).
//
//   bazel run -c opt //benchmarks:gemm_benchmark
#include <cstdio>
#include <cstring>
#include <initializer_list>
#include <map>
#include <string>
#include <vector>

#include "benchmark/benchmark.h"
#include "benchmarks/benchmark_support.h"
#include "core/kernels/matmul.h"
#include "core/tensor/factories.h"
#include "oneapi/dnnl/dnnl.hpp"

namespace mixrt::bench {
namespace {

using namespace ::mixrt::kernels;

using Shape = GemmShape;
constexpr Shape kShapes[] = {
    {"512x4096x4096", 512, 4096, 4096},
    {"1024x1024x1024", 1024, 1024, 1024},
    {"16x4096x4096", 16, 4096, 4096},  // Small M: memory-bound.
    {"32x64x64", 32, 64, 64},  // A small MLP layer: fixed costs per call.
};

// Linear weight gradients dW = dy^T x (m = out features, k = tokens, n =
// in features): a transposed view of dy, x in rows.
constexpr Shape kWeightGradients[] = {
    {"dW_1024x1024x256", 1024, 1024, 256},  // Linear(256 -> 1024).
    {"dW_256x1024x1024", 256, 1024, 1024},  // Linear(1024 -> 256).
    {"dW_1024x512x1024", 1024, 512, 1024},  // Neither: a control.
};

dnnl::memory::data_type OneDnnType(DType t) {
  return t == DType::kF32    ? dnnl::memory::data_type::f32
         : t == DType::kBF16 ? dnnl::memory::data_type::bf16
                             : dnnl::memory::data_type::f16;
}

// y = x @ w^T with w stored [n, k] as a Linear layer's weight is.
void MixrtLinear(benchmark::State& state, Shape s, DType dtype) {
  const Device device = CpuDevice();
  auto x = randn({s.m, s.k}, dtype, device);
  auto w = randn({s.n, s.k}, dtype, device);
  if (!x.ok() || !w.ok()) {
    state.SkipWithError("allocation failed");
    return;
  }
  MatmulOptions options;
  options.out_dtype = DType::kF32;
  for (auto _ : state) {
    auto y = linear(*x, *w, Tensor(), options);
    if (!y.ok()) {
      state.SkipWithError(std::string(y.status().message()).c_str());
      return;
    }
    benchmark::DoNotOptimize(y->data_ptr());
  }
  SetGemmFlops(state, s);
  ReportPeakMemory(state, device);
}

// Writes every byte of the raw side's operands (0x3c: a normal finite
// value in f32, bf16 and f16). Memory oneDNN allocates is never touched
// until then, so all of it reads as the kernel's one shared zero page,
// which stays in L1: the raw side ran 14% faster than mixrt's on
// 1024x1024x1024 f32 from that alone.
void FillOperands(std::initializer_list<dnnl::memory*> operands) {
  for (dnnl::memory* m : operands) {
    std::memset(m->get_data_handle(), 0x3c, m->get_desc().get_size());
  }
}

// Times c = a x b (shape s) on oneDNN directly, operands filled.
void TimeRawMatmul(benchmark::State& state, Shape s,
                   const dnnl::memory::desc& a, const dnnl::memory::desc& b,
                   const dnnl::memory::desc& c) {
  dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  dnnl::stream stream(engine);
  dnnl::matmul::primitive_desc pd;
  try {
    pd = dnnl::matmul::primitive_desc(dnnl::matmul::desc(a, b, c), engine);
  } catch (const dnnl::error&) {
    state.SkipWithError("oneDNN has no matmul for this dtype here");
    return;
  }
  dnnl::matmul prim(pd);
  dnnl::memory am(a, engine), bm(b, engine), cm(c, engine);
  FillOperands({&am, &bm, &cm});
  for (auto _ : state) {
    prim.execute(
        stream,
        {{DNNL_ARG_SRC, am}, {DNNL_ARG_WEIGHTS, bm}, {DNNL_ARG_DST, cm}});
    stream.wait();
  }
  SetGemmFlops(state, s);
  state.SetLabel(pd.impl_info_str());
}

void RawOneDnn(benchmark::State& state, Shape s, DType dtype) {
  using dnnl::memory;
  // The weight viewed transposed: [k, n] with strides (1, k).
  TimeRawMatmul(
      state, s,
      memory::desc({s.m, s.k}, OneDnnType(dtype), memory::dims{s.k, 1}),
      memory::desc({s.k, s.n}, OneDnnType(dtype), memory::dims{1, s.k}),
      memory::desc({s.m, s.n}, memory::data_type::f32, memory::dims{s.n, 1}));
}

void MixrtWeightGradient(benchmark::State& state, Shape s) {
  const Device device = CpuDevice();
  auto dy = randn({s.k, s.m}, DType::kF32, device);
  auto x = randn({s.k, s.n}, DType::kF32, device);
  if (!dy.ok() || !x.ok()) {
    state.SkipWithError("allocation failed");
    return;
  }
  const Tensor dy_t = *dy->transpose(0, 1);
  for (auto _ : state) {
    auto dw = matmul(dy_t, *x);
    if (!dw.ok()) {
      state.SkipWithError(std::string(dw.status().message()).c_str());
      return;
    }
    benchmark::DoNotOptimize(dw->data_ptr());
  }
  SetGemmFlops(state, s);
  ReportPeakMemory(state, device);
}

void RawOneDnnWeightGradient(benchmark::State& state, Shape s) {
  using dnnl::memory;
  const auto f32 = memory::data_type::f32;
  TimeRawMatmul(state, s,
                memory::desc({s.m, s.k}, f32, memory::dims{1, s.m}),  // dy^T
                memory::desc({s.k, s.n}, f32, memory::dims{s.n, 1}),
                memory::desc({s.m, s.n}, f32, memory::dims{s.n, 1}));
}

void Register() {
  for (const Shape& s : kWeightGradients) {
    for (const char* who : {"mixrt", "onednn"}) {
      benchmark::RegisterBenchmark(
          (std::string(who) + "/" + s.name).c_str(),
          who[0] == 'm' ? MixrtWeightGradient : RawOneDnnWeightGradient, s)
          ->Unit(benchmark::kMillisecond)
          ->UseRealTime()
          ->MinTime(0.5);
    }
  }
  for (const Shape& s : kShapes) {
    for (DType dtype : {DType::kF32, DType::kBF16, DType::kF16}) {
      const std::string suffix =
          std::string(s.name) + "/" + std::string(DTypeName(dtype));
      benchmark::RegisterBenchmark(("mixrt/" + suffix).c_str(), MixrtLinear, s,
                                   dtype)
          ->Unit(benchmark::kMillisecond)
          ->UseRealTime()
          ->MinTime(0.5);
      benchmark::RegisterBenchmark(("onednn/" + suffix).c_str(), RawOneDnn, s,
                                   dtype)
          ->Unit(benchmark::kMillisecond)
          ->UseRealTime()
          ->MinTime(0.5);
    }
  }
}

void PrintRatios(const RateCollector& rates) {
  std::printf("\nRatios (same run, GFLOP/s):\n");
  for (const Shape& s : kWeightGradients) {
    const std::string n = s.name;
    const double mixrt = rates.Get("mixrt/" + n),
                 raw = rates.Get("onednn/" + n);
    if (mixrt > 0 && raw > 0) {
      std::printf(
          "  %-18s f32  mixrt %7.1f  raw oneDNN as laid out %7.1f  "
          "%.2fx\n",
          s.name, mixrt, raw, mixrt / raw);
    }
  }
  for (const Shape& s : kShapes) {
    const std::string n = s.name;
    auto rate = [&](const std::string& who, const char* dtype) {
      return rates.Get(who + "/" + n + "/" + dtype);
    };
    for (const char* dtype : {"f32", "bf16", "f16"}) {
      const double mixrt = rate("mixrt", dtype), raw = rate("onednn", dtype);
      if (mixrt > 0 && raw > 0) {
        std::printf(
            "  %-16s %-4s mixrt %7.1f  raw oneDNN %7.1f  overhead %+.1f%%\n",
            s.name, dtype, mixrt, raw, 100.0 * (raw / mixrt - 1));
      } else if (mixrt > 0) {
        std::printf(
            "  %-16s %-4s mixrt %7.1f  raw oneDNN: none for this dtype\n",
            s.name, dtype, mixrt);
      }
    }
    const double f32 = rate("mixrt", "f32");
    if (f32 > 0) {
      std::printf("  %-16s bf16/f32 %.2fx  f16/f32 %.2fx\n", s.name,
                  rate("mixrt", "bf16") / f32, rate("mixrt", "f16") / f32);
    }
  }
}

}  // namespace
}  // namespace mixrt::bench

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  mixrt::bench::LoadPlugins(argv[0]);
  mixrt::bench::Register();
  mixrt::bench::RateCollector rates("GFLOP/s");
  benchmark::RunSpecifiedBenchmarks(&rates);
  mixrt::bench::PrintRatios(rates);
  benchmark::Shutdown();
  return 0;
}
