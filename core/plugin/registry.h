// The process-wide registry of backend plugins: loads them (idempotently),
// keeps why each one was skipped, and selects a device.
//
//   mixrt::Registry& registry = mixrt::Registry::Global();
//   registry.LoadAll();  // search path: see plugin_search_path.h
//   absl::StatusOr<mixrt::Device> device = registry.SelectDevice();
//
// All methods are thread-safe.
#ifndef MIXRT_CORE_PLUGIN_REGISTRY_H_
#define MIXRT_CORE_PLUGIN_REGISTRY_H_

#include <memory>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "core/plugin/backend.h"
#include "core/plugin/device.h"

namespace mixrt {

inline constexpr char kBackendEnv[] = "MIXRT_BACKEND";

struct LoadOptions {
  // Probe each plugin in a child process first (see isolated_probe.h): a
  // plugin that crashes or hangs while loading is reported, not fatal.
  bool isolate = false;
  absl::Duration timeout = absl::Seconds(10);
  // Which plugins run out of process (isolated_plugin.h): "all" or names;
  // unset: $MIXRT_PLUGIN_ISOLATION.
  std::optional<std::string> isolation;
  // For those: the watchdog's budget per call; unset: $MIXRT_PLUGIN_TIMEOUT_S
  // or 60 s.
  std::optional<absl::Duration> call_timeout;
  // For those: the shared arena's size in bytes; unset:
  // $MIXRT_PLUGIN_ARENA_BYTES or the default (isolation/arena_size.h).
  std::optional<uint64_t> arena_bytes;
};

enum class PluginState {
  kUsable,     // Loaded, with at least one device.
  kNoDevice,   // Loaded; no device here (e.g. CUDA on a machine without GPU).
  kFailed,     // Refused, or failed to load or initialize.
  kUntrusted,  // Found by searching where others could write; not loaded.
  kNotFound,   // Named explicitly, but nothing is there.
};

// "usable", "no device", "failed", "untrusted", "not found".
const char* PluginStateName(PluginState state);

// What happened to one plugin file.
struct PluginReport {
  std::string path;
  std::string name;  // Empty when the file never identified itself.
  PluginState state = PluginState::kFailed;
  bool usable = false;
  std::string reason;  // Why it is not usable (load error or no device).
  const Backend* backend = nullptr;  // Set when it loaded (even deviceless).
};

class Registry {
 public:
  static Registry& Global();

  Registry() = default;
  Registry(const Registry&) = delete;
  Registry& operator=(const Registry&) = delete;

  // Loads one plugin file. Loading the same file again returns the same
  // backend. A second file with an already-registered backend name is
  // refused. Failures are also recorded in Reports().
  absl::StatusOr<const Backend*> Load(const std::string& path,
                                      const LoadOptions& options = {});

  // Loads everything on the search path (explicit paths first). Problems with
  // individual plugins are recorded, never fatal.
  //
  // A file not named in `explicit_paths` is skipped as untrusted unless
  // UntrustedReason (plugin_search_path.h) finds nothing: anyone who could
  // write to it or a directory above it could have dropped code there.
  // A named path or MIXRT_PLUGIN_PATH entry that yields no plugin file is
  // reported as kNotFound (once).
  void LoadAll(const std::vector<std::string>& explicit_paths = {},
               const LoadOptions& options = {});

  std::vector<PluginReport> Reports() const;
  // Backends with at least one device, best score first.
  std::vector<const Backend*> UsableBackends() const;
  absl::StatusOr<const Backend*> FindBackend(const std::string& name) const;

  // By `name`, else $MIXRT_BACKEND, else the usable backend with the best
  // score. The error lists what is available and why others were skipped.
  // Choosing by score, a plugin that failed or was not trusted is never
  // passed over silently: each one is named, with its reason, in a warning
  // on stderr (once per plugin and registry), since it may have been the
  // backend that should have won.
  absl::StatusOr<Device> SelectDevice(const std::string& name = "") const;

 private:
  std::string SkippedSummary() const ABSL_SHARED_LOCKS_REQUIRED(mu_);
  void WarnPassedOver(const Backend* selected) const;

  // A std mutex, not absl::Mutex: Debian's Abseil is built without
  // ThreadSanitizer annotations, so TSan cannot see absl::Mutex's ordering
  // and reports every guarded access as a race; pthread locks it intercepts.
  mutable std::shared_mutex mu_;
  std::vector<std::unique_ptr<Backend>> backends_ ABSL_GUARDED_BY(mu_);
  std::vector<PluginReport> reports_ ABSL_GUARDED_BY(mu_);
  mutable std::mutex warned_mu_;
  mutable absl::flat_hash_set<std::string> warned_ ABSL_GUARDED_BY(warned_mu_);
};

}  // namespace mixrt

#endif  // MIXRT_CORE_PLUGIN_REGISTRY_H_
