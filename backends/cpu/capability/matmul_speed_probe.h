// Measures how fast lower-precision matmul runs relative to f32 on this CPU,
// through the plugin's own matmul path. Cached on disk in
// $MIXRT_CACHE_DIR (else the XDG cache dir, common/cache_dir.h), keyed by
// CPU model, oneDNN version, ISA and the thread count in force, so later
// processes pay nothing; MIXRT_CPU_SKIP_PROBE=1 skips it (ratios unknown).
//
// The rule for trusting a cached ratio: an entry is measured again when it
// is older than 30 days (the machine's load or firmware may have changed),
// has no timestamp, or holds a ratio outside [1/16, 16] (no CPU path is that
// far from f32: such a value came from a disturbed measurement), or above
// 1.25 for a dtype converted to f32 to be multiplied (it is f32's work plus
// the conversions). A fresh measurement outside that range is used once and
// not stored.
#ifndef MIXRT_BACKENDS_CPU_CAPABILITY_MATMUL_SPEED_PROBE_H_
#define MIXRT_BACKENDS_CPU_CAPABILITY_MATMUL_SPEED_PROBE_H_

#include <string>

namespace mixrt::cpu {

inline constexpr char kSkipProbeEnv[] = "MIXRT_CPU_SKIP_PROBE";
inline constexpr double kMinPlausibleRatio = 1.0 / 16;
inline constexpr double kMaxPlausibleRatio = 16;
inline constexpr double kMaxConvertedRatio = 1.25;
inline constexpr double kMaxCacheAgeSeconds = 30 * 24 * 3600.0;

struct MatmulSpeeds {
  double bf16_vs_f32 = 0;  // Throughput ratio; 0 = not measured.
  double f16_vs_f32 = 0;
  std::string source;  // "measured", "cached <path>", "skipped", ...
};

// The key the cache is stored under, for this CPU and oneDNN.
std::string ProbeCacheKey();

// Returns cached speeds or measures them (well under a second).
MatmulSpeeds GetMatmulSpeeds();

}  // namespace mixrt::cpu

#endif  // MIXRT_BACKENDS_CPU_CAPABILITY_MATMUL_SPEED_PROBE_H_
