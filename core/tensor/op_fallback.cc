#include "core/tensor/op_fallback.h"

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <mutex>

#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/on_off.h"
#include "core/plugin/registry.h"

namespace mixrt {
namespace {

constexpr char kDeclaredUnsupportedPayload[] = "mixrt.dev/declared-unsupported";

struct PolicyState {
  std::mutex mu;
  std::optional<std::string> override_policy;
};

PolicyState& Policy() {
  static PolicyState* state = new PolicyState();
  return *state;
}

// "auto", "off" or a backend name.
std::string Normalize(absl::string_view value) {
  const std::string v =
      absl::AsciiStrToLower(absl::StripAsciiWhitespace(value));
  if (v.empty() || v == "auto") return "auto";
  if (const std::optional<bool> on = ParseOnOff(v)) return *on ? "auto" : "off";
  return std::string(absl::StripAsciiWhitespace(value));
}

const std::string& EnvironmentPolicy() {
  static const std::string* policy = [] {
    const char* env = std::getenv(kFallbackEnv);
    return new std::string(Normalize(env == nullptr ? "" : env));
  }();
  return *policy;
}

struct LogState {
  std::mutex mu;
  std::vector<std::string> lines;
  absl::flat_hash_set<std::string> seen;
};

LogState& Log() {
  static LogState* state = new LogState();
  return *state;
}

std::atomic<int64_t> g_launches{0};
std::atomic<int64_t> g_copies{0};
std::atomic<int64_t> g_bytes{0};

}  // namespace

absl::Status SetFallbackPolicy(std::optional<std::string> policy) {
  PolicyState& state = Policy();
  std::lock_guard<std::mutex> lock(state.mu);
  if (policy.has_value()) policy = Normalize(*policy);
  state.override_policy = std::move(policy);
  return absl::OkStatus();
}

std::string FallbackPolicy() {
  PolicyState& state = Policy();
  std::lock_guard<std::mutex> lock(state.mu);
  return state.override_policy.value_or(EnvironmentPolicy());
}

absl::StatusOr<Device> FallbackDeviceFor(const Device& from,
                                         const OpSignature& sig) {
  const std::string policy = FallbackPolicy();
  const std::string op = OpSignatureName(sig);
  if (policy == "off") {
    return absl::UnimplementedError(absl::StrCat(
        "fallback is off (", kFallbackEnv, "=0), so nothing else runs it"));
  }
  if (policy != "auto") {
    absl::StatusOr<const Backend*> named =
        Registry::Global().FindBackend(policy);
    if (!named.ok()) {
      return absl::FailedPreconditionError(
          absl::StrCat(kFallbackEnv, "=", policy,
                       " names no usable backend: ", named.status().message()));
    }
    const Device device(*named, 0);
    if (device == from || !(*named)->RunsOp(0, sig)) {
      return absl::UnimplementedError(absl::StrCat("the fallback backend '",
                                                   policy, "' (", kFallbackEnv,
                                                   ") does not run it either"));
    }
    return device;
  }
  std::vector<std::string> tried;
  for (const Backend* backend : Registry::Global().UsableBackends()) {
    const Device device(backend, 0);
    if (device == from || !device.has_flag(MIXRT_DEVICE_FLAG_HOST_MEMORY)) {
      continue;
    }
    if (backend->RunsOp(0, sig)) return device;
    tried.push_back(backend->name());
  }
  return absl::UnimplementedError(
      tried.empty()
          ? std::string("no other usable host backend is loaded to run it")
          : absl::StrCat("no usable host backend runs it either (asked: ",
                         absl::StrJoin(tried, ", "), ")"));
}

FallbackCounters GetFallbackCounters() {
  FallbackCounters c;
  c.launches = g_launches.load(std::memory_order_relaxed);
  c.copies = g_copies.load(std::memory_order_relaxed);
  c.bytes_copied = g_bytes.load(std::memory_order_relaxed);
  return c;
}

std::vector<std::string> FallbackLog() {
  LogState& log = Log();
  std::lock_guard<std::mutex> lock(log.mu);
  return log.lines;
}

void NoteFallback(const std::string& line, int64_t copies,
                  int64_t bytes_copied) {
  g_launches.fetch_add(1, std::memory_order_relaxed);
  g_copies.fetch_add(copies, std::memory_order_relaxed);
  g_bytes.fetch_add(bytes_copied, std::memory_order_relaxed);
  LogState& log = Log();
  std::lock_guard<std::mutex> lock(log.mu);
  if (!log.seen.insert(line).second) return;
  log.lines.push_back(line);
  std::fprintf(stderr, "mixrt fallback: %s\n", line.c_str());
}

absl::Status DeclaredUnsupportedError(const Device& device,
                                      const OpSignature& sig,
                                      const std::string& why) {
  absl::Status status = absl::UnimplementedError(absl::StrCat(
      device.ToString(), " does not run ", OpSignatureName(sig), ": ", why));
  status.SetPayload(kDeclaredUnsupportedPayload, absl::Cord("1"));
  return status;
}

bool IsDeclaredUnsupported(const absl::Status& status) {
  return status.GetPayload(kDeclaredUnsupportedPayload).has_value();
}

}  // namespace mixrt
