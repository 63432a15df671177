// Recipe: pick a backend at run time and see what lower precision costs.
//
//   bazel run //examples:select_backend                   # best available
//   bazel run //examples:select_backend -- --backend=reference
//   MIXRT_BACKEND=cpu bazel-bin/examples/select_backend
//
// It loads every plugin it can find, prints which device it chose and why
// others were skipped, then rounds N(0, 1) samples to f16 and bf16 on that
// device and reports the relative error of each format: the price autocast
// pays for speed (bf16 keeps 8 mantissa bits, f16 11).
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/status/statusor.h"
#include "common/out_of_memory.h"
#include "examples/flag_checks.h"
#include "examples/load_plugins.h"
#include "mixrt/mixrt.h"

ABSL_FLAG(std::string, backend, "",
          "Backend name; default: $MIXRT_BACKEND, "
          "else the best available.");
ABSL_FLAG(int64_t, n, 1 << 20, "Number of samples.");
ABSL_FLAG(uint64_t, seed, 0, "Random seed.");

int main(int argc, char** argv) {
  mixrt::ReportOutOfMemoryAtExit("select_backend");
  mixrt::examples::ParseFlags(argc, argv,
                              "pick a backend at run time and "
                              "see what lower precision costs");
  if (absl::Status n = mixrt::examples::CheckFlag("n", absl::GetFlag(FLAGS_n),
                                                  1, int64_t{1} << 30);
      !n.ok()) {
    std::fprintf(stderr, "%s\n", std::string(n.message()).c_str());
    return 1;
  }
  mixrt::Registry& registry = mixrt::Registry::Global();
  mixrt::examples::LoadPlugins(argv[0]);
  for (const mixrt::PluginReport& r : registry.Reports()) {
    if (!r.usable)
      std::printf("skipped %s: %s\n", r.path.c_str(), r.reason.c_str());
  }
  absl::StatusOr<mixrt::Device> device =
      registry.SelectDevice(absl::GetFlag(FLAGS_backend));
  if (!device.ok()) {
    std::fprintf(stderr, "%s\n",
                 std::string(device.status().message()).c_str());
    return 1;
  }
  std::printf("device: %s (%s)\n", device->ToString().c_str(),
              device->info().name.c_str());

  const int64_t n = absl::GetFlag(FLAGS_n);
  mixrt::Generator gen(absl::GetFlag(FLAGS_seed));
  absl::StatusOr<mixrt::Tensor> x =
      mixrt::randn({n}, mixrt::DType::kF32, *device, 0.0, 1.0, &gen);
  if (!x.ok()) {
    std::fprintf(stderr, "%s\n", std::string(x.status().message()).c_str());
    return 1;
  }
  const std::vector<float> exact = *x->to_float_vector();
  for (mixrt::DType dtype : {mixrt::DType::kF16, mixrt::DType::kBF16}) {
    absl::StatusOr<mixrt::Tensor> low = x->to(dtype);
    if (!low.ok()) {
      std::printf("%s: %s\n", std::string(mixrt::DTypeName(dtype)).c_str(),
                  std::string(low.status().message()).c_str());
      continue;
    }
    const std::vector<float> rounded = *low->to_float_vector();
    // Below the smallest normal number precision degrades gradually
    // (subnormals): counted apart so the bound for normal values is visible.
    const bool f16 = dtype == mixrt::DType::kF16;
    const double smallest_normal =
        f16 ? std::ldexp(1.0, -14) : std::ldexp(1.0, -126);
    double max_rel = 0, sum_rel = 0;
    int64_t normal = 0;
    for (int64_t i = 0; i < n; ++i) {
      if (std::fabs(exact[i]) < smallest_normal) continue;
      const double rel = std::fabs((rounded[i] - exact[i]) / exact[i]);
      max_rel = std::max(max_rel, rel);
      sum_rel += rel;
      ++normal;
    }
    std::printf(
        "%-4s: max relative error %.3g (unit roundoff %.3g), mean %.3g; "
        "%lld of %lld samples below the smallest normal\n",
        std::string(mixrt::DTypeName(dtype)).c_str(), max_rel,
        f16 ? std::ldexp(1.0, -11) : std::ldexp(1.0, -8),
        sum_rel / std::max<int64_t>(normal, 1),
        static_cast<long long>(n - normal), static_cast<long long>(n));
  }
  return 0;
}
