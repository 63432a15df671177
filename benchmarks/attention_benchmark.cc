// scaled_dot_product_attention on the CPU plugin: the fused kernel against
// the math path (matmul, softmax, matmul) in the same run, forward and
// forward + backward, f32 and bf16, causal or not; median milliseconds and
// peak tensor memory. benchmarks/attention_vs_pytorch.sh runs PyTorch's
// F.scaled_dot_product_attention with the same sizes right after.
//
//   bazel run -c opt //benchmarks:attention_benchmark -- --seqs=512,1024
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_join.h"
#include "benchmarks/benchmark_support.h"
#include "mixrt/mixrt.h"

ABSL_FLAG(std::vector<std::string>, seqs,
          std::vector<std::string>({"512", "1024", "2048", "4096"}),
          "Sequence lengths.");
ABSL_FLAG(std::vector<std::string>, dtypes,
          std::vector<std::string>({"f32", "bf16"}), "Input dtypes.");
ABSL_FLAG(std::vector<std::string>, causal,
          std::vector<std::string>({"yes", "no"}), "Causal masking: yes, no.");
ABSL_FLAG(std::vector<std::string>, passes,
          std::vector<std::string>({"fwd", "fwd+bwd"}), "Passes timed.");
ABSL_FLAG(bool, math, true,
          "Also time the math path (off when profiling the fused kernel).");
ABSL_FLAG(int, batch, 8, "Batch.");
ABSL_FLAG(int, heads, 8, "Heads.");
ABSL_FLAG(int, head_dim, 64, "Head dimension.");
ABSL_FLAG(int, repeats, 3, "Timed runs per case (the median is printed).");
ABSL_FLAG(int64_t, max_math_seq, 2048,
          "Longest sequence the math path runs forward + backward at (its "
          "L x S matrices need ~16 GiB at 4096).");
ABSL_FLAG(int64_t, max_math_mib, 8192,
          "The math path runs only where its L x S matrices (about 3 of "
          "them in the dtype, measured) fit in this many MiB: f32 forward at "
          "4096 needs ~12 GiB.");

namespace {

using mixrt::Tensor;

struct Measure {
  double ms = 0;
  double peak_mib = 0;
  bool ran = false;
};

Measure Time(const mixrt::Device& device, const std::vector<Tensor>& qkv,
             mixrt::AttentionBackend backend, bool causal, bool backward) {
  mixrt::CachingAllocator& allocator =
      device.backend()->allocator(device.index());
  std::vector<double> ms;
  double peak = 0;
  for (int r = 0; r <= absl::GetFlag(FLAGS_repeats); ++r) {  // r = 0: warm-up
    for (Tensor t : qkv) t.set_grad(Tensor());  // Handles share the grad.
    allocator.ResetPeak();
    const auto start = std::chrono::steady_clock::now();
    absl::StatusOr<Tensor> y = mixrt::scaled_dot_product_attention(
        qkv[0], qkv[1], qkv[2], {.is_causal = causal, .backend = backend});
    if (!y.ok()) {
      std::fprintf(stderr, "attention failed: %s\n",
                   std::string(y.status().message()).c_str());
      return {};
    }
    if (backward) {
      absl::StatusOr<Tensor> loss = mixrt::sum(*y);
      if (!loss.ok() || !loss->backward().ok()) return {};
    } else {
      (void)y->item();  // Waits for the device.
    }
    const double s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
            .count();
    if (r > 0) ms.push_back(1000 * s);
    peak = std::max(peak, allocator.stats().peak_bytes_in_use / 1048576.0);
  }
  std::sort(ms.begin(), ms.end());
  return {ms[ms.size() / 2], peak, true};
}

}  // namespace

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  // A misspelt value used to time something else silently (forward for
  // "forward+backward").
  const auto refuse_unknown = [](const char* flag,
                                 const std::vector<std::string>& values,
                                 std::initializer_list<const char*> allowed) {
    for (const std::string& v : values) {
      if (std::find(allowed.begin(), allowed.end(), v) == allowed.end()) {
        std::fprintf(stderr, "--%s: '%s' is not one of %s\n", flag, v.c_str(),
                     absl::StrJoin(allowed, ", ").c_str());
        return false;
      }
    }
    return true;
  };
  if (!refuse_unknown("passes", absl::GetFlag(FLAGS_passes),
                      {"fwd", "fwd+bwd"}) ||
      !refuse_unknown("causal", absl::GetFlag(FLAGS_causal), {"yes", "no"})) {
    return 2;
  }
  mixrt::bench::LoadPlugins(argv[0]);
  const mixrt::Device device = mixrt::bench::CpuDevice();
  const int64_t b = absl::GetFlag(FLAGS_batch), h = absl::GetFlag(FLAGS_heads),
                e = absl::GetFlag(FLAGS_head_dim);
  std::printf(
      "scaled_dot_product_attention on %s (%s), batch %lld, %lld "
      "heads, head dim %lld; median of %d\n",
      device.ToString().c_str(), device.info().name.c_str(),
      static_cast<long long>(b), static_cast<long long>(h),
      static_cast<long long>(e), absl::GetFlag(FLAGS_repeats));
  std::printf("%-6s %-5s %-7s %-9s %11s %11s %8s %11s %11s\n", "seq", "dtype",
              "causal", "pass", "fused ms", "math ms", "speedup", "fused MiB",
              "math MiB");
  for (const std::string& seq_text : absl::GetFlag(FLAGS_seqs)) {
    const int64_t l = std::stoll(seq_text);
    for (const std::string& dtype_name : absl::GetFlag(FLAGS_dtypes)) {
      const absl::StatusOr<mixrt::DType> parsed = mixrt::ParseDType(dtype_name);
      if (!parsed.ok()) {
        std::fprintf(stderr, "--dtypes: %s\n",
                     std::string(parsed.status().message()).c_str());
        return 2;
      }
      const mixrt::DType dtype = *parsed;
      mixrt::Generator gen(1);
      std::vector<Tensor> qkv;
      for (int i = 0; i < 3; ++i) {
        Tensor t = *mixrt::randn({b, h, l, e}, dtype, device, 0, 1, &gen);
        (void)t.set_requires_grad(true);
        qkv.push_back(t);
      }
      for (const std::string& causal_name : absl::GetFlag(FLAGS_causal)) {
        const bool causal = causal_name == "yes";
        for (const std::string& pass : absl::GetFlag(FLAGS_passes)) {
          const bool backward = pass == "fwd+bwd";
          const Measure fused = Time(
              device, qkv, mixrt::AttentionBackend::kFused, causal, backward);
          Measure math;
          const double math_mib =
              3.0 * b * h * l * l * mixrt::DTypeSize(dtype) / 1048576.0;
          if (absl::GetFlag(FLAGS_math) &&
              math_mib <= absl::GetFlag(FLAGS_max_math_mib) &&
              (!backward || l <= absl::GetFlag(FLAGS_max_math_seq))) {
            math = Time(device, qkv, mixrt::AttentionBackend::kMath, causal,
                        backward);
          }
          std::printf(
              "%-6lld %-5s %-7s %-9s %11.1f ", static_cast<long long>(l),
              std::string(mixrt::DTypeName(dtype)).c_str(),
              causal ? "yes" : "no", backward ? "fwd+bwd" : "fwd", fused.ms);
          if (math.ran) {
            std::printf("%11.1f %7.2fx %11.1f %11.1f\n", math.ms,
                        math.ms / fused.ms, fused.peak_mib, math.peak_mib);
          } else {
            std::printf("%11s %8s %11.1f %11s\n", "-", "-", fused.peak_mib,
                        "-");
          }
          std::fflush(stdout);
        }
      }
    }
  }
  return 0;
}
