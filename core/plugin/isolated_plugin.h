// Out-of-process plugins: the plugin runs in mixrt-plugin-host, a small
// executable that loads it, and this process talks to it through the same C
// ABI marshalled over shared memory (isolation/shared_channel.h). A plugin
// that crashes, exits or hangs in any call takes down only its own process:
// the backend is marked failed with the reason ("crashed: SIGSEGV in
// matmul", "hung: conv2d did not return in 30 s") and every later call on it
// returns UNAVAILABLE with that reason.
//
// Memory. A host-memory device's tensors live in an arena (one memfd mapped
// in both processes), so a launch passes offsets, not copies; memory outside
// the arena (another device's host tensors) is copied into it for the launch
// and back after, so the plugin never sees memory that was not given to it.
// What is and is not guaranteed: a plugin that writes past a tensor can
// damage only the arena (other tensors of this backend, which it could
// write anyway) and its own process, never the host's heap or stack. A
// device-memory plugin keeps device memory in its process; pointers travel
// as handles and copies go through a staging range of the arena.
//
// Fusion and kernel graphs are forwarded (the subgraph or the steps travel
// once; a fused kernel or a graph is the plugin's handle; a run sends the
// places of its values or buffers). Not forwarded: profiling ranges. Calls
// are serialized.
//
//   MIXRT_PLUGIN_ISOLATION=all | name,name  which plugins run out of process
//   MIXRT_PLUGIN_TIMEOUT_S=60               the watchdog's budget per call
//   MIXRT_PLUGIN_HOST=/path/mixrt-plugin-host  (default: beside the core)
//   MIXRT_PLUGIN_ARENA_BYTES=8G             the shared arena's size (default:
//                                           the machine's memory, or half of
//                                           what RLIMIT_AS leaves)
#ifndef MIXRT_CORE_PLUGIN_ISOLATED_PLUGIN_H_
#define MIXRT_CORE_PLUGIN_ISOLATED_PLUGIN_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "core/plugin/backend.h"

namespace mixrt {

inline constexpr char kPluginIsolationEnv[] = "MIXRT_PLUGIN_ISOLATION";
inline constexpr char kPluginTimeoutEnv[] = "MIXRT_PLUGIN_TIMEOUT_S";
inline constexpr char kPluginHostEnv[] = "MIXRT_PLUGIN_HOST";
inline constexpr char kPluginArenaEnv[] = "MIXRT_PLUGIN_ARENA_BYTES";

struct IsolationOptions {
  // A call that does not return within this is a hang: the plugin's
  // process is killed. Generous: a large kernel on a slow CPU is not a hang.
  absl::Duration call_timeout = absl::Seconds(60);
  // For mixrt-plugin-host to start and load the plugin.
  absl::Duration start_timeout = absl::Seconds(30);
  // The executable; empty: FindPluginHost().
  std::string host_binary;
  // The arena's size (address space, sparse); 0: the machine's memory, or
  // half the room an address-space limit leaves (isolation/arena_size.h).
  uint64_t arena_bytes = 0;
  // Appended to the plugin's name ("cpu" + "_isolated"): the same plugin
  // both in and out of process, side by side (mixrt bench --isolate).
  std::string name_suffix;
};

// The options with MIXRT_PLUGIN_TIMEOUT_S, MIXRT_PLUGIN_HOST and
// MIXRT_PLUGIN_ARENA_BYTES applied (an unparsable value is an error naming
// it).
absl::StatusOr<IsolationOptions> IsolationOptionsFromEnvironment();

// Which plugins run out of process: "all", or names ("cpu", "faulty": a
// plugin file libmixrt_<name>.so is named <name>). Empty: none.
struct IsolationPolicy {
  bool all = false;
  std::vector<std::string> names;
  bool Wants(const std::string& plugin_path) const;
  bool empty() const { return !all && names.empty(); }
};
IsolationPolicy ParseIsolationPolicy(const std::string& text);
// MIXRT_PLUGIN_ISOLATION's policy.
IsolationPolicy IsolationPolicyFromEnvironment();

// `explicit_path` ($MIXRT_PLUGIN_HOST), else the default set below, else
// mixrt-plugin-host beside the core library or the executable; refused
// where others could have written it (common/trusted_path.h), as plugins
// found by searching are.
absl::StatusOr<std::string> FindPluginHost(const std::string& explicit_path);
// Where this build's mixrt-plugin-host is (core/bundled sets it from the
// runfiles), for FindPluginHost.
void SetDefaultPluginHost(const std::string& path);

// Starts mixrt-plugin-host for the plugin at `path` and returns a backend
// whose every call goes to it, validated as LoadPlugin validates a plugin
// loaded in process.
absl::StatusOr<std::unique_ptr<Backend>> LoadPluginOutOfProcess(
    const std::string& path, const IsolationOptions& options);

}  // namespace mixrt

#endif  // MIXRT_CORE_PLUGIN_ISOLATED_PLUGIN_H_
