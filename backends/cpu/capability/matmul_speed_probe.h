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
  double f16_vs_f32 = 0;   // The f16 way chosen.
  // Where f16 can run as three bf16 products (F16MatmulByBf16PairsPossible):
  // whether it does, chosen because they measured faster than one f32
  // product of widened operands, and their ratio (0 where not measured).
  bool f16_as_bf16_pairs = false;
  double f16_pairs_vs_f32 = 0;
  std::string source;  // "measured", "cached <path>", "skipped", ...
};

// The f16 way where both exist: three bf16 products when they took less
// time than the widened f32 product (a tie keeps the simpler widening).
bool F16ByBf16PairsIsFaster(double pairs_seconds, double widened_seconds);

// The key the cache is stored under, for this CPU and oneDNN.
std::string ProbeCacheKey();

// Returns cached speeds or measures them (well under a second), and sets
// the f16 way they chose (SetF16MatmulByBf16Pairs).
MatmulSpeeds GetMatmulSpeeds();

}  // namespace mixrt::cpu

#endif  // MIXRT_BACKENDS_CPU_CAPABILITY_MATMUL_SPEED_PROBE_H_
