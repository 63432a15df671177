#include "core/plugin/isolated_plugin.h"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/trusted_path.h"
#include "core/plugin/isolation/arena_size.h"
#include "core/plugin/plugin_host_process.h"
#include "core/plugin/plugin_host_table.h"
#include "core/plugin/plugin_loader.h"
#include "core/plugin/plugin_search_path.h"
#include "mixrt/status_macros.h"

namespace mixrt {

using isolation::kHostBinaryName;

// ---------------------------------------------------------------------------

absl::StatusOr<IsolationOptions> IsolationOptionsFromEnvironment() {
  IsolationOptions options;
  if (const char* env = std::getenv(kPluginTimeoutEnv)) {
    double seconds = 0;
    if (!absl::SimpleAtod(env, &seconds) || !(seconds > 0) || seconds > 86400) {
      return absl::InvalidArgumentError(
          absl::StrCat(kPluginTimeoutEnv, "='", env,
                       "': expected seconds, a number in (0, 86400]"));
    }
    options.call_timeout = absl::Seconds(seconds);
  }
  if (const char* env = std::getenv(kPluginHostEnv)) {
    options.host_binary = env;
  }
  if (const char* env = std::getenv(kPluginArenaEnv)) {
    const std::optional<uint64_t> bytes = isolation::ParseByteSize(env);
    if (!bytes.has_value()) {
      return absl::InvalidArgumentError(absl::StrCat(
          kPluginArenaEnv, "='", env,
          "': expected a size in bytes, or with K, M, G or T (\"8G\")"));
    }
    options.arena_bytes = *bytes;
  }
  return options;
}

bool IsolationPolicy::Wants(const std::string& plugin_path) const {
  if (all) return true;
  if (names.empty()) return false;
  const size_t slash = plugin_path.rfind('/');
  std::string file =
      slash == std::string::npos ? plugin_path : plugin_path.substr(slash + 1);
  constexpr absl::string_view kPrefix = "libmixrt_";
  constexpr absl::string_view kSuffix = ".so";
  if (!absl::StartsWith(file, kPrefix) || !absl::EndsWith(file, kSuffix)) {
    return false;
  }
  const std::string name = file.substr(
      kPrefix.size(), file.size() - kPrefix.size() - kSuffix.size());
  return std::find(names.begin(), names.end(), name) != names.end();
}

IsolationPolicy ParseIsolationPolicy(const std::string& text) {
  IsolationPolicy policy;
  for (absl::string_view part : absl::StrSplit(text, ',', absl::SkipEmpty())) {
    part = absl::StripAsciiWhitespace(part);
    if (part.empty()) continue;
    if (part == "all") {
      policy.all = true;
    } else {
      policy.names.emplace_back(part);
    }
  }
  return policy;
}

IsolationPolicy IsolationPolicyFromEnvironment() {
  const char* env = std::getenv(kPluginIsolationEnv);
  return env == nullptr ? IsolationPolicy{} : ParseIsolationPolicy(env);
}

std::mutex g_default_host_mu;
std::string& DefaultPluginHost() {
  static std::string* path = new std::string();
  return *path;
}

void SetDefaultPluginHost(const std::string& path) {
  std::lock_guard<std::mutex> lock(g_default_host_mu);
  DefaultPluginHost() = path;
}

absl::StatusOr<std::string> FindPluginHost(const std::string& explicit_path) {
  std::vector<std::string> candidates;
  if (!explicit_path.empty()) {
    candidates.push_back(explicit_path);
  } else {
    {
      std::lock_guard<std::mutex> lock(g_default_host_mu);
      if (!DefaultPluginHost().empty()) {
        candidates.push_back(DefaultPluginHost());
      }
    }
    const std::string core_dir = CoreObjectDirectory();
    if (!core_dir.empty()) {
      candidates.push_back(absl::StrCat(core_dir, "/", kHostBinaryName));
    }
    char exe[4096];
    const ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
    if (n > 0) {
      std::string self(exe, n);
      const size_t slash = self.rfind('/');
      if (slash != std::string::npos) {
        candidates.push_back(
            absl::StrCat(self.substr(0, slash), "/", kHostBinaryName));
      }
    }
  }
  for (const std::string& path : candidates) {
    if (access(path.c_str(), X_OK) != 0) continue;
    if (path[0] != '/') {
      return absl::FailedPreconditionError(
          absl::StrCat(kPluginHostEnv, "='", path,
                       "' is a relative path; give an absolute one"));
    }
    const std::string unsafe = files::UntrustedReason(path);
    if (!unsafe.empty()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "refusing to run ", path, " for an out-of-process plugin: ", unsafe));
    }
    return path;
  }
  return absl::NotFoundError(absl::StrCat(
      "no ", kHostBinaryName, " to run an out-of-process plugin in (looked: ",
      candidates.empty() ? std::string("nowhere")
                         : absl::StrJoin(candidates, ", "),
      "); set ", kPluginHostEnv, " to its absolute path"));
}

absl::StatusOr<std::unique_ptr<Backend>> LoadPluginOutOfProcess(
    const std::string& path, const IsolationOptions& options) {
  auto plugin = std::make_shared<isolation::PluginHostProcess>(path, options);
  const int slot = isolation::AcquireSlot(plugin.get());
  if (slot < 0) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "plugin ", path, ": already ", isolation::kMaxIsolatedPlugins,
        " plugins out of process (the most one process runs)"));
  }
  MIXRT_RETURN_IF_ERROR(plugin->Start(slot));
  MIXRT_ASSIGN_OR_RETURN(
      std::unique_ptr<Backend> backend,
      BackendFromApiTable(path, nullptr, plugin->table(), plugin->score()));
  backend->AdoptProcess(std::move(plugin));
  return backend;
}

}  // namespace mixrt
