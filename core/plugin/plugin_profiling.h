// Profiling ranges for plugins (ABI 1.2's profiler_range): while on, the
// host tells a plugin that has the function where each launch it makes on
// the plugin's device begins and ends, by name, for the vendor's trace
// viewer. Off by default; MIXRT_PLUGIN_PROFILING=1 turns it on for a run.
#ifndef MIXRT_CORE_PLUGIN_PLUGIN_PROFILING_H_
#define MIXRT_CORE_PLUGIN_PLUGIN_PROFILING_H_

#include <cstdint>

namespace mixrt {

inline constexpr char kPluginProfilingEnv[] = "MIXRT_PLUGIN_PROFILING";

// One relaxed load after the first call (which reads the environment).
bool PluginProfilingEnabled();
// Overrides the environment from now on.
void SetPluginProfiling(bool on);
// A fresh id pairing a range's BEGIN with its END.
uint64_t NextProfilerRangeId();

}  // namespace mixrt

#endif  // MIXRT_CORE_PLUGIN_PLUGIN_PROFILING_H_
