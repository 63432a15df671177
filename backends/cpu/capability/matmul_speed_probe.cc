#include "backends/cpu/capability/matmul_speed_probe.h"

#include <omp.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "backends/cpu/capability/cpu_info.h"
#include "backends/cpu/kernels/cpu_matmul.h"
#include "common/atomic_write.h"
#include "common/cache_dir.h"
#include "common/regular_file_read.h"
#include "nlohmann/json.hpp"
#include "plugins/sdk/plugin.h"

namespace mixrt::cpu {
namespace {

// Large enough to reach steady GEMM throughput (a 256x1024x1024 probe
// understated bf16's gain by 40% on an avx512_bf16 machine), small enough
// that three dtypes take about 0.3 s once per machine: 4.3 GFLOP per run.
constexpr int64_t kM = 512, kK = 2048, kN = 2048;
constexpr int kRepeats = 2;
// Measurements before an implausible one is used (and not cached).
constexpr int kAttempts = 3;

std::string CachePath() {
  const std::string dir = files::MixrtCacheDir();
  return dir.empty() ? "" : dir + "/cpu_matmul_speeds.json";
}

// A cache file is small; anything larger is not ours.
constexpr uint64_t kMaxCacheBytes = 1 << 20;

// Seconds for one matmul in `dtype` through RunMatmul; 0 on failure. With
// `warm_up` an untimed run first creates the primitive (cached afterwards,
// so later calls for the dtype skip it).
double TimeMatmul(MixrtDtype dtype, bool warm_up) {
  const size_t bytes = dtype == MIXRT_DTYPE_F32 ? 4 : 2;
  std::vector<uint8_t> a(kM * kK * bytes, 0), b(kK * kN * bytes, 0);
  std::vector<float> c(kM * kN);
  // Small non-zero values; the data do not change the timing.
  for (size_t i = 0; i < a.size(); i += bytes) a[i + bytes - 1] = 0x3c;
  for (size_t i = 0; i < b.size(); i += bytes) b[i + bytes - 1] = 0x3c;
  const int64_t a_shape[] = {kM, kK}, a_strides[] = {kK, 1};
  const int64_t b_shape[] = {kK, kN}, b_strides[] = {kN, 1};
  const int64_t c_shape[] = {kM, kN}, c_strides[] = {kN, 1};
  auto desc = [](void* data, MixrtDtype t, const int64_t* shape,
                 const int64_t* strides) {
    MixrtTensorDesc d{};
    d.struct_size = sizeof(d);
    d.data = data;
    d.dtype = t;
    d.ndim = 2;
    d.shape = shape;
    d.strides = strides;
    return d;
  };
  const MixrtTensorDesc da = desc(a.data(), dtype, a_shape, a_strides);
  const MixrtTensorDesc db = desc(b.data(), dtype, b_shape, b_strides);
  const MixrtTensorDesc dc =
      desc(c.data(), MIXRT_DTYPE_F32, c_shape, c_strides);
  MixrtMatmulAttrs attrs{};
  attrs.struct_size = sizeof(attrs);
  sdk::KernelCall call;
  call.op = MIXRT_OP_MATMUL;
  call.inputs = {sdk::TensorRef(da), sdk::TensorRef(db)};
  call.outputs = {sdk::TensorRef(dc)};
  call.attrs = &attrs;
  if (warm_up && !RunMatmul(call).ok()) return 0;
  const auto start = std::chrono::steady_clock::now();
  if (!RunMatmul(call).ok()) return 0;
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
      .count();
}

int64_t NowSeconds() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// A dtype that oneDNN cannot multiply natively is converted to f32 and
// multiplied as f32: it can gain only the halved operand traffic, never
// the 1.8x once cached here for f16 on an AVX2 CPU (an f32 measurement
// disturbed by a busy machine, shown to users as "emulated ... measured
// 1.82x f32 throughput").
double MaxPlausibleRatio(MixrtDtype dtype, bool f16_as_bf16_pairs) {
  const bool converted = MatmulImplementation(dtype).empty() &&
                         !(dtype == MIXRT_DTYPE_F16 && f16_as_bf16_pairs);
  return converted ? kMaxConvertedRatio : kMaxPlausibleRatio;
}

bool Plausible(double ratio, MixrtDtype dtype, bool f16_as_bf16_pairs) {
  return std::isfinite(ratio) && ratio >= kMinPlausibleRatio &&
         ratio <= MaxPlausibleRatio(dtype, f16_as_bf16_pairs);
}

bool Plausible(const MatmulSpeeds& speeds) {
  const bool pairs = speeds.f16_as_bf16_pairs;
  return Plausible(speeds.bf16_vs_f32, MIXRT_DTYPE_BF16, pairs) &&
         Plausible(speeds.f16_vs_f32, MIXRT_DTYPE_F16, pairs) &&
         (speeds.f16_pairs_vs_f32 == 0 ||
          Plausible(speeds.f16_pairs_vs_f32, MIXRT_DTYPE_F16, true));
}

// The cached entry for `key`, when it exists, is well formed, plausible and
// younger than kMaxCacheAgeSeconds; otherwise false (measure again).
bool ReadCache(const std::string& path, const std::string& key,
               MatmulSpeeds* speeds) {
  // A FIFO, directory or device at the path is refused, never waited on.
  absl::StatusOr<std::string> text =
      files::ReadRegularFile(path, kMaxCacheBytes);
  if (!text.ok()) return false;
  const nlohmann::json j = nlohmann::json::parse(*text, nullptr, false);
  if (j.is_discarded() || !j.is_object() || !j.contains(key)) return false;
  const nlohmann::json& e = j[key];
  if (!e.is_object()) return false;
  for (const char* field :
       {"bf16_vs_f32", "f16_vs_f32", "f16_pairs_vs_f32", "measured_at"}) {
    if (!e.contains(field) || !e[field].is_number()) return false;
  }
  // An entry from before the f16 way was measured has no choice: measure.
  if (!e.contains("f16_as_bf16_pairs") ||
      !e["f16_as_bf16_pairs"].is_boolean()) {
    return false;
  }
  const double age =
      static_cast<double>(NowSeconds()) - e["measured_at"].get<double>();
  MatmulSpeeds cached;
  cached.bf16_vs_f32 = e["bf16_vs_f32"].get<double>();
  cached.f16_vs_f32 = e["f16_vs_f32"].get<double>();
  cached.f16_pairs_vs_f32 = e["f16_pairs_vs_f32"].get<double>();
  // Pairs where this machine cannot run them: not this machine's entry.
  cached.f16_as_bf16_pairs = e["f16_as_bf16_pairs"].get<bool>();
  if (cached.f16_as_bf16_pairs && !F16MatmulByBf16PairsPossible()) return false;
  if (!Plausible(cached) || !(age >= 0) || age > kMaxCacheAgeSeconds) {
    return false;
  }
  cached.source = absl::StrCat("cached in ", path);
  *speeds = cached;
  return true;
}

// Merges the entry into the cache file atomically: a crash never leaves a
// half-written cache, and a planted symlink or FIFO is never written through
// (common/atomic_write.h). Failures only cost a measurement next time.
void WriteCache(const std::string& path, const std::string& key,
                const MatmulSpeeds& speeds) {
  if (!files::MakeCacheDirectories(path.substr(0, path.rfind('/')))) return;
  nlohmann::json j = nlohmann::json::object();
  if (absl::StatusOr<std::string> old =
          files::ReadRegularFile(path, kMaxCacheBytes);
      old.ok()) {
    nlohmann::json parsed = nlohmann::json::parse(*old, nullptr, false);
    if (!parsed.is_discarded() && parsed.is_object()) j = parsed;
  }
  j[key] = {{"bf16_vs_f32", speeds.bf16_vs_f32},
            {"f16_vs_f32", speeds.f16_vs_f32},
            {"f16_as_bf16_pairs", speeds.f16_as_bf16_pairs},
            {"f16_pairs_vs_f32", speeds.f16_pairs_vs_f32},
            {"measured_at", NowSeconds()}};
  files::WriteFileAtomically(
      path,
      j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n")
      .IgnoreError();
}

// One measurement: rounds interleave the dtypes, so a burst of load on
// the machine slows all three alike instead of skewing one ratio; each
// keeps its best.
// Where f16 can go two ways (three bf16 products on AMX, or one f32
// product of widened operands), both are timed and the faster kept.
std::optional<MatmulSpeeds> Measure() {
  MatmulSpeeds speeds;
  const bool two_ways = F16MatmulByBf16PairsPossible();
  double f32 = 1e30, bf16 = 1e30, f16 = 1e30, f16_pairs = 1e30;
  for (int round = 0; round < kRepeats; ++round) {
    const bool first = round == 0;
    f32 = std::min(f32, TimeMatmul(MIXRT_DTYPE_F32, first));
    bf16 = std::min(bf16, TimeMatmul(MIXRT_DTYPE_BF16, first));
    if (two_ways) {
      SetF16MatmulByBf16Pairs(true);
      f16_pairs = std::min(f16_pairs, TimeMatmul(MIXRT_DTYPE_F16, first));
      SetF16MatmulByBf16Pairs(false);
    }
    f16 = std::min(f16, TimeMatmul(MIXRT_DTYPE_F16, first));
  }
  SetF16MatmulByBf16Pairs(true);  // Undecided again; the caller chooses.
  if (f32 <= 0 || bf16 <= 0 || f16 <= 0 || f16_pairs <= 0) return std::nullopt;
  speeds.bf16_vs_f32 = f32 / bf16;
  speeds.f16_as_bf16_pairs = two_ways && F16ByBf16PairsIsFaster(f16_pairs, f16);
  speeds.f16_pairs_vs_f32 = two_ways ? f32 / f16_pairs : 0;
  speeds.f16_vs_f32 = f32 / (speeds.f16_as_bf16_pairs ? f16_pairs : f16);
  speeds.source = "measured at load";
  return speeds;
}

}  // namespace

std::string ProbeCacheKey() {
  const CpuInfo& info = GetCpuInfo();
  // The thread count in force now (MIXRT_NUM_THREADS is applied after
  // GetCpuInfo may have been cached), which is what the kernels will use.
  return absl::StrCat(
      info.model, "|oneDNN ", info.onednn_version, "|", info.onednn_isa, "|",
      omp_get_max_threads(), " threads|", kM, "x", kK, "x", kN,
      F16MatmulByBf16PairsPossible() ? "|f16 as bf16 pairs" : "",
      // A product on the oneDNN 3.x companion is another way to measure.
      MatmulOnCompanion(MIXRT_DTYPE_F16)
          ? absl::StrCat("|f16 on ", MatmulImplementation(MIXRT_DTYPE_F16))
          : "",
      MatmulOnCompanion(MIXRT_DTYPE_BF16)
          ? absl::StrCat("|bf16 on ", MatmulImplementation(MIXRT_DTYPE_BF16))
          : "");
}

bool F16ByBf16PairsIsFaster(double pairs_seconds, double widened_seconds) {
  return pairs_seconds < widened_seconds;
}

MatmulSpeeds GetMatmulSpeeds() {
  MatmulSpeeds speeds;
  const char* skip = std::getenv(kSkipProbeEnv);
  if (skip != nullptr && std::string(skip) == "1") {
    speeds.source = absl::StrCat("skipped (", kSkipProbeEnv, "=1)");
    return speeds;
  }
  const std::string path = CachePath();
  const std::string key = ProbeCacheKey();
  if (!path.empty() && ReadCache(path, key, &speeds)) {
    SetF16MatmulByBf16Pairs(speeds.f16_as_bf16_pairs);
    return speeds;
  }
  // A busy machine can disturb a measurement past what is plausible (a
  // converted dtype faster than 1.25x f32): measure again, a few times,
  // before settling for one that is used but not kept.
  std::optional<MatmulSpeeds> measured;
  for (int attempt = 0; attempt < kAttempts; ++attempt) {
    measured = Measure();
    if (!measured || Plausible(*measured)) break;
  }
  if (!measured) {
    speeds.source = "measurement failed";
    return speeds;
  }
  // An implausible measurement is used for this process but not kept.
  if (!path.empty() && Plausible(*measured)) WriteCache(path, key, *measured);
  SetF16MatmulByBf16Pairs(measured->f16_as_bf16_pairs);
  return *measured;
}

}  // namespace mixrt::cpu
