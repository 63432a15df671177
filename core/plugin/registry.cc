#include "core/plugin/registry.h"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <shared_mutex>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/trusted_path.h"
#include "core/plugin/isolated_plugin.h"
#include "core/plugin/isolated_probe.h"
#include "core/plugin/plugin_loader.h"
#include "core/plugin/plugin_search_path.h"
#include "mixrt/status_macros.h"

namespace mixrt {
namespace {

std::string CanonicalPath(const std::string& path) {
  char resolved[PATH_MAX];
  return realpath(path.c_str(), resolved) != nullptr ? std::string(resolved)
                                                     : path;
}

absl::StatusOr<std::unique_ptr<Backend>> LoadOutOfProcess(
    const std::string& path, const LoadOptions& options) {
  MIXRT_ASSIGN_OR_RETURN(IsolationOptions isolation,
                         IsolationOptionsFromEnvironment());
  if (options.call_timeout.has_value()) {
    isolation.call_timeout = *options.call_timeout;
  }
  if (options.arena_bytes.has_value()) {
    isolation.arena_bytes = *options.arena_bytes;
  }
  return LoadPluginOutOfProcess(path, isolation);
}

}  // namespace

const char* PluginStateName(PluginState state) {
  switch (state) {
    case PluginState::kUsable:
      return "usable";
    case PluginState::kNoDevice:
      return "no device";
    case PluginState::kFailed:
      return "failed";
    case PluginState::kUntrusted:
      return "untrusted";
    case PluginState::kNotFound:
      return "not found";
  }
  return "unknown";
}

Registry& Registry::Global() {
  static Registry* registry = new Registry();
  return *registry;
}

absl::StatusOr<const Backend*> Registry::Load(const std::string& path,
                                              const LoadOptions& options) {
  const std::string canonical = CanonicalPath(path);
  if (options.isolate) {
    {
      std::shared_lock<std::shared_mutex> lock(mu_);
      for (const PluginReport& report : reports_) {
        if (report.path == canonical && report.backend != nullptr) {
          return report.backend;
        }
      }
    }
    absl::Status probe = ProbePluginInChild(canonical, options.timeout);
    if (!probe.ok()) {
      std::lock_guard<std::shared_mutex> lock(mu_);
      PluginReport report;
      report.path = canonical;
      report.state = PluginState::kFailed;
      report.reason = std::string(probe.message());
      reports_.push_back(report);
      return probe;
    }
  }
  // Loading runs plugin code; holding the lock keeps loading serialized and
  // idempotent (plugin_initialize is called once per file).
  std::lock_guard<std::shared_mutex> lock(mu_);
  for (const PluginReport& report : reports_) {
    if (report.path != canonical) continue;
    if (report.backend != nullptr) return report.backend;
    return absl::FailedPreconditionError(report.reason);
  }
  PluginReport report;
  report.path = canonical;
  report.state = PluginState::kFailed;
  const IsolationPolicy policy = options.isolation.has_value()
                                     ? ParseIsolationPolicy(*options.isolation)
                                     : IsolationPolicyFromEnvironment();
  absl::StatusOr<std::unique_ptr<Backend>> loaded =
      policy.Wants(canonical) ? LoadOutOfProcess(canonical, options)
                              : LoadPlugin(canonical);
  if (!loaded.ok()) {
    report.reason = std::string(loaded.status().message());
    reports_.push_back(report);
    return loaded.status();
  }
  std::unique_ptr<Backend> backend = std::move(loaded).value();
  report.name = backend->name();
  for (const std::unique_ptr<Backend>& other : backends_) {
    if (other->name() == backend->name()) {
      report.reason =
          absl::StrCat("a backend named '", backend->name(),
                       "' is already loaded from ", other->identity().path);
      reports_.push_back(report);
      return absl::AlreadyExistsError(report.reason);
    }
  }
  report.backend = backend.get();
  report.usable = !backend->devices().empty();
  report.state = report.usable ? PluginState::kUsable : PluginState::kNoDevice;
  if (!report.usable) {
    report.reason = absl::StrCat("no device: ", backend->no_device_reason());
  }
  reports_.push_back(report);
  backends_.push_back(std::move(backend));
  return report.backend;
}

void Registry::LoadAll(const std::vector<std::string>& explicit_paths,
                       const LoadOptions& options) {
  // Where each location came from: named ones are trusted as given, and
  // named or listed ones that yield nothing are reported.
  enum class Origin { kNamed, kEnvironment, kBinaryDirectory };
  std::vector<std::pair<std::string, Origin>> locations;
  for (const std::string& p : explicit_paths) {
    locations.emplace_back(p, Origin::kNamed);
  }
  if (const char* env = std::getenv(kPluginPathEnv)) {
    for (const std::string& entry : SplitPluginPath(env)) {
      locations.emplace_back(entry, Origin::kEnvironment);
    }
  }
  const std::string core_dir = CoreObjectDirectory();
  if (!core_dir.empty()) {
    locations.emplace_back(core_dir, Origin::kBinaryDirectory);
  }
  for (const auto& entry : locations) {
    // Not a structured binding: the lambda below captures it, which clang
    // (the fuzz build) refuses before C++20.
    const std::string& location = entry.first;
    const Origin origin = entry.second;
    const bool named = origin == Origin::kNamed;
    if (origin == Origin::kEnvironment &&
        (location.empty() || location[0] != '/')) {
      // Resolved from wherever the program happens to run: code from the
      // current directory, which the user did not name. Reported once.
      std::lock_guard<std::shared_mutex> lock(mu_);
      if (std::any_of(
              reports_.begin(), reports_.end(), [&](const PluginReport& r) {
                return r.path == location && r.state == PluginState::kUntrusted;
              })) {
        continue;
      }
      PluginReport report;
      report.path = location;
      report.state = PluginState::kUntrusted;
      report.reason = absl::StrCat(
          "not searched: a relative path in ", kPluginPathEnv,
          " would load code from the current directory; give an absolute path");
      reports_.push_back(report);
      continue;
    }
    const std::vector<std::string> files = ExpandPluginLocation(location);
    // A typo, or a relative path resolved from another directory (bazel run
    // changes it), must not pass silently.
    if (origin != Origin::kBinaryDirectory && files.empty()) {
      struct stat st;
      std::lock_guard<std::shared_mutex> lock(mu_);
      const bool reported = std::any_of(
          reports_.begin(), reports_.end(), [&](const PluginReport& r) {
            return r.path == location && r.state == PluginState::kNotFound;
          });
      if (reported) continue;
      PluginReport report;
      report.path = location;
      report.state = PluginState::kNotFound;
      report.reason = absl::StrCat(
          ::stat(location.c_str(), &st) != 0
              ? absl::StrCat("not found: ", std::strerror(errno))
              : std::string("not found: the directory holds no libmixrt_*.so "
                            "file"),
          named ? "" : absl::StrCat(" (listed in ", kPluginPathEnv, ")"),
          !location.empty() && location[0] == '/'
              ? ""
              : " (a relative path, resolved from the current directory)");
      reports_.push_back(report);
      continue;
    }
    for (const std::string& file : files) {
      // Only a file named on the command line is trusted as given; one
      // found by searching, or listed in MIXRT_PLUGIN_PATH (which anyone
      // who can set the environment or write a profile controls), must sit
      // where only root or this user can write.
      if (!named) {
        const std::string unsafe = files::UntrustedReason(file);
        if (!unsafe.empty()) {
          std::lock_guard<std::shared_mutex> lock(mu_);
          const std::string path = CanonicalPath(file);
          // Once per file: already refused, or loaded as named.
          if (std::any_of(
                  reports_.begin(), reports_.end(),
                  [&](const PluginReport& r) { return r.path == path; })) {
            continue;
          }
          PluginReport report;
          report.path = path;
          report.state = PluginState::kUntrusted;
          report.reason =
              absl::StrCat("not loaded: ", unsafe,
                           " (name the file with --plugin to load it anyway)");
          reports_.push_back(report);
          // Said at once, not only in `mixrt info`: a prefix installed
          // under /tmp loses its own plugins (and with them the fallback
          // and the bench's oracle), which nothing else would explain.
          const std::string where =
              origin == Origin::kEnvironment
                  ? absl::StrCat("listed in ", kPluginPathEnv)
                  : "found beside the mixrt library or program";
          std::fprintf(
              stderr,
              "mixrt: warning: plugin %s (%s) was not loaded: %s. Plugins "
              "load only from directories no one but you or root can write: "
              "install mixrt in one (under $HOME, not /tmp or another shared "
              "directory) or fix the permissions, or name the file with "
              "--plugin=PATH to load it anyway\n",
              path.c_str(), where.c_str(), unsafe.c_str());
          continue;
        }
      }
      Load(file, options).IgnoreError();  // Recorded in reports_.
    }
  }
}

std::vector<PluginReport> Registry::Reports() const {
  std::shared_lock<std::shared_mutex> lock(mu_);
  std::vector<PluginReport> reports = reports_;
  // An out-of-process plugin that crashed or hung since it loaded.
  for (PluginReport& report : reports) {
    if (report.backend == nullptr) continue;
    const std::string failure = report.backend->failure();
    if (failure.empty()) continue;
    report.state = PluginState::kFailed;
    report.usable = false;
    report.reason = absl::StrCat("out of process: ", failure);
  }
  return reports;
}

std::vector<const Backend*> Registry::UsableBackends() const {
  std::shared_lock<std::shared_mutex> lock(mu_);
  std::vector<const Backend*> usable;
  for (const std::unique_ptr<Backend>& backend : backends_) {
    if (!backend->devices().empty() && backend->identity().score > 0 &&
        backend->failure().empty()) {
      usable.push_back(backend.get());
    }
  }
  std::stable_sort(usable.begin(), usable.end(),
                   [](const Backend* a, const Backend* b) {
                     return a->identity().score > b->identity().score;
                   });
  return usable;
}

absl::StatusOr<const Backend*> Registry::FindBackend(
    const std::string& name) const {
  std::shared_lock<std::shared_mutex> lock(mu_);
  for (const std::unique_ptr<Backend>& backend : backends_) {
    if (backend->name() != name) continue;
    if (const std::string failure = backend->failure(); !failure.empty()) {
      return absl::UnavailableError(absl::StrCat(
          "backend '", name, "' failed out of process: ", failure));
    }
    if (backend->devices().empty()) {
      return absl::NotFoundError(absl::StrCat(
          "backend '", name, "' has no device: ", backend->no_device_reason()));
    }
    return backend.get();
  }
  std::vector<std::string> names;
  for (const std::unique_ptr<Backend>& backend : backends_) {
    names.push_back(backend->name());
  }
  return absl::NotFoundError(
      absl::StrCat("no backend named '", name, "' is loaded (loaded: ",
                   names.empty() ? "none" : absl::StrJoin(names, ", "), ")",
                   SkippedSummary()));
}

std::string Registry::SkippedSummary() const {
  std::vector<std::string> skipped;
  for (const PluginReport& report : reports_) {
    if (!report.usable) skipped.push_back(report.reason);
  }
  if (skipped.empty()) return "";
  return absl::StrCat("; skipped: ", absl::StrJoin(skipped, "; "));
}

absl::StatusOr<Device> Registry::SelectDevice(const std::string& name) const {
  std::string wanted = name;
  if (wanted.empty()) {
    if (const char* env = std::getenv(kBackendEnv)) wanted = env;
  }
  if (!wanted.empty()) {
    absl::StatusOr<const Backend*> backend = FindBackend(wanted);
    if (!backend.ok()) return backend.status();
    return Device(*backend, 0);
  }
  const std::vector<const Backend*> usable = UsableBackends();
  if (usable.empty()) {
    std::shared_lock<std::shared_mutex> lock(mu_);
    return absl::NotFoundError(
        absl::StrCat("no usable mixrt backend found (set ", kPluginPathEnv,
                     " or name a plugin explicitly)", SkippedSummary()));
  }
  WarnPassedOver(usable.front());
  return Device(usable.front(), 0);
}

void Registry::WarnPassedOver(const Backend* selected) const {
  std::vector<PluginReport> passed_over;
  {
    std::shared_lock<std::shared_mutex> lock(mu_);
    for (const PluginReport& report : reports_) {
      if (report.state == PluginState::kFailed ||
          report.state == PluginState::kUntrusted) {
        passed_over.push_back(report);
      }
    }
  }
  std::lock_guard<std::mutex> lock(warned_mu_);
  for (const PluginReport& report : passed_over) {
    if (!warned_.insert(report.path).second) continue;
    std::fprintf(stderr,
                 "mixrt: warning: plugin %s was not used (%s): %s; selected "
                 "backend '%s' instead\n",
                 report.path.c_str(), PluginStateName(report.state),
                 report.reason.c_str(), selected->name().c_str());
  }
}

}  // namespace mixrt
