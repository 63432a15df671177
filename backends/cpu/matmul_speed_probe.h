// Measures, once per machine, how fast lower-precision matmul runs relative
// to f32 on this CPU, through the plugin's own matmul path. Cached on disk
// (keyed by CPU model, oneDNN version, ISA and threads) so later processes
// pay nothing; MIXRT_CPU_SKIP_PROBE=1 skips it (ratios then unknown).
#ifndef MIXRT_BACKENDS_CPU_MATMUL_SPEED_PROBE_H_
#define MIXRT_BACKENDS_CPU_MATMUL_SPEED_PROBE_H_

#include <string>

namespace mixrt::cpu {

inline constexpr char kSkipProbeEnv[] = "MIXRT_CPU_SKIP_PROBE";
inline constexpr char kProbeCacheEnv[] = "MIXRT_CACHE_DIR";

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

#endif  // MIXRT_BACKENDS_CPU_MATMUL_SPEED_PROBE_H_
