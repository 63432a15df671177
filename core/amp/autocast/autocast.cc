#include "core/amp/autocast/autocast.h"

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/on_off.h"
#include "core/amp/autocast/autocast_policy.h"
#include "core/autograd/differentiable_cast.h"
#include "core/autograd/grad_mode.h"
#include "core/autograd/node.h"
#include "mixrt/status_macros.h"

namespace mixrt {
namespace {

struct DeviceState {
  bool enabled = false;
  std::optional<DType> dtype;
  bool auto_precision = false;
  bool cache_enabled = true;
  bool low_precision_weight_gradients = false;
};

thread_local std::map<std::string, DeviceState> t_state;
// Every guard counts, as torch.autocast's nesting counter does; the weight
// cache is cleared when the outermost guard exits.
thread_local int t_nesting = 0;
// Keyed by the weight's autograd state, which a weak reference in the entry
// vouches for: a weight freed inside the region can hand its address to a
// new tensor, and that tensor must not be given the old weight's cast
// (PyTorch keeps a weakref for the same reason). The entry also holds the
// weight's storage and its version when cast: an optimizer step, a copy_
// into the weight or a checkpoint load inside one long region bumps the
// version, and the weight is cast again (PyTorch's cache has no such check
// and serves the stale cast).
struct CachedCast {
  std::weak_ptr<AutogradMeta> source;
  const Storage* storage = nullptr;
  uint64_t version = 0;
  Tensor cast;
};
thread_local absl::flat_hash_map<std::pair<const AutogradMeta*, int>,
                                 CachedCast>
    t_cache;
thread_local bool t_logging = false;
thread_local std::vector<AutocastDecision> t_log;

// MIXRT_DISABLE_AMP as read once at first use.
const absl::StatusOr<bool>& AmpEnvironment() {
  static const absl::StatusOr<bool>* parsed = [] {
    const char* env = std::getenv(kDisableAmpEnv);
    return new absl::StatusOr<bool>(env == nullptr ? absl::StatusOr<bool>(false)
                                                   : ParseDisableAmpValue(env));
  }();
  return *parsed;
}

std::atomic<bool>& GlobalDisable() {
  static std::atomic<bool> disabled{AmpEnvironment().value_or(false)};
  return disabled;
}

std::mutex g_warn_mu;
std::vector<std::string>* g_warnings = new std::vector<std::string>();

void WarnOnce(const std::string& text) {
  std::lock_guard<std::mutex> lock(g_warn_mu);
  for (const std::string& w : *g_warnings) {
    if (w == text) return;
  }
  g_warnings->push_back(text);
  std::fprintf(stderr, "mixrt autocast: %s\n", text.c_str());
}

const char* Name(DType d) { return DTypeName(d).data(); }

thread_local int t_cache_bypass = 0;

absl::StatusOr<Tensor> CastCached(const Tensor& t, DType target,
                                  bool cache_enabled) {
  const bool cacheable = cache_enabled && t_cache_bypass == 0 &&
                         !InferenceModeEnabled() && t.is_leaf() &&
                         t.requires_grad() && t.dtype() == DType::kF32;
  if (!cacheable) return cast(t, target);
  const std::shared_ptr<AutogradMeta> meta = t.autograd_meta();
  const auto key = std::make_pair(meta.get(), static_cast<int>(target));
  const Storage* storage = t.storage().get();
  // Read before casting: a write racing with the cast leaves the entry
  // older than the weight, so the next use casts again.
  const uint64_t version = t.storage()->version();
  auto it = t_cache.find(key);
  if (it != t_cache.end()) {
    const CachedCast& hit = it->second;
    if (hit.source.lock() == meta && hit.storage == storage &&
        hit.version == version) {
      return hit.cast;
    }
    // The weight is gone (its address was reused), or it was written or
    // given other memory since it was cast.
    t_cache.erase(it);
  }
  MIXRT_ASSIGN_OR_RETURN(Tensor c, cast(t, target));
  t_cache.emplace(key, CachedCast{meta, storage, version, c});
  return c;
}

// The state a guard for `device_type` inherits: the innermost guard's, or
// the defaults outside any.
DeviceState Enclosing(const std::string& device_type) {
  auto it = t_state.find(device_type);
  if (it != t_state.end()) return it->second;
  DeviceState defaults;
  defaults.dtype = DefaultAutocastDType(device_type);
  return defaults;
}

}  // namespace

DType DefaultAutocastDType(absl::string_view device_type) {
  return device_type == "cuda" ? DType::kF16 : DType::kBF16;
}

struct AutocastGuard::Saved {
  bool had = false;
  DeviceState state;
};

AutocastGuard::AutocastGuard(std::string device_type, AutocastOptions options)
    : device_type_(std::move(device_type)), saved_(std::make_unique<Saved>()) {
  const DeviceState enclosing = Enclosing(device_type_);
  auto it = t_state.find(device_type_);
  if (it != t_state.end()) {
    saved_->had = true;
    saved_->state = it->second;
  }
  DeviceState s;
  s.enabled = options.enabled;
  s.dtype = options.dtype.has_value() ? options.dtype : enclosing.dtype;
  s.auto_precision = options.dtype.has_value()
                         ? options.auto_precision
                         : options.auto_precision || enclosing.auto_precision;
  s.cache_enabled = options.cache_enabled.value_or(enclosing.cache_enabled);
  s.low_precision_weight_gradients =
      options.low_precision_weight_gradients.value_or(
          enclosing.low_precision_weight_gradients);
  if (s.enabled && device_type_ == "cpu" && !s.auto_precision &&
      s.dtype != DType::kBF16 && s.dtype != DType::kF16) {
    WarnOnce(absl::StrCat(
        "In CPU autocast, but the target dtype (", Name(*s.dtype),
        ") is not supported. Disabling autocast. CPU Autocast only supports "
        "dtype of bf16, f16 currently."));
    s.enabled = false;
  }
  t_state[device_type_] = s;
  ++t_nesting;
}

AutocastGuard::AutocastGuard(std::string device_type, DType dtype, bool enabled,
                             std::optional<bool> cache_enabled)
    : AutocastGuard(std::move(device_type),
                    AutocastOptions{dtype, false, enabled, cache_enabled}) {}

AutocastGuard::~AutocastGuard() {
  if (saved_->had) {
    t_state[device_type_] = saved_->state;
  } else {
    t_state.erase(device_type_);
  }
  if (--t_nesting == 0) t_cache.clear();
}

struct AutocastState::Data {
  std::map<std::string, DeviceState> devices;
};

AutocastCacheBypass::AutocastCacheBypass() { ++t_cache_bypass; }
AutocastCacheBypass::~AutocastCacheBypass() { --t_cache_bypass; }

std::string AutocastStateKey() {
  std::string key;
  for (const auto& [device_type, s] : t_state) {
    // An entry a guard left at the defaults means what no entry means.
    if (!s.enabled && !s.dtype && !s.auto_precision && s.cache_enabled &&
        !s.low_precision_weight_gradients) {
      continue;
    }
    absl::StrAppend(&key, device_type, ":", s.enabled ? "on" : "off", ",",
                    s.dtype ? DTypeName(*s.dtype) : "default", ",",
                    s.auto_precision ? "auto" : "fixed", ",",
                    s.cache_enabled ? "cache" : "nocache",
                    s.low_precision_weight_gradients
                        ? ",low-precision weight gradients"
                        : "",
                    ";");
  }
  return key;
}

AutocastState CaptureAutocastState() {
  auto data = std::make_shared<AutocastState::Data>();
  data->devices = t_state;
  return AutocastState{std::move(data)};
}

AutocastStateGuard::AutocastStateGuard(const AutocastState& state)
    : previous_(CaptureAutocastState()) {
  t_state = state.data->devices;
  ++t_nesting;  // The weight cache lives while any guard does.
}

AutocastStateGuard::~AutocastStateGuard() {
  t_state = previous_.data->devices;
  if (--t_nesting == 0) t_cache.clear();
}

bool AutocastEnabled(absl::string_view device_type) {
  if (GlobalDisable().load()) return false;
  auto it = t_state.find(std::string(device_type));
  return it != t_state.end() && it->second.enabled;
}

DType AutocastDType(absl::string_view device_type) {
  return Enclosing(std::string(device_type))
      .dtype.value_or(DefaultAutocastDType(device_type));
}

bool AutocastCacheEnabled(absl::string_view device_type) {
  return Enclosing(std::string(device_type)).cache_enabled;
}

bool AutocastLowPrecisionWeightGradients(absl::string_view device_type) {
  return AutocastEnabled(device_type) &&
         Enclosing(std::string(device_type)).low_precision_weight_gradients;
}

absl::StatusOr<DType> AutocastPromoteType(DType autocast_dtype,
                                          absl::Span<const Tensor> inputs) {
  DType current = autocast_dtype;
  for (const Tensor& t : inputs) {
    if (!t.defined() || !IsFloating(t.dtype())) continue;
    const DType next = t.dtype();
    if (current == DType::kF32 || next == DType::kF32) {
      current = DType::kF32;
    } else if (current != next) {
      return absl::InvalidArgumentError(absl::StrCat(
          "Unexpected floating ScalarType in at::autocast::prioritize: an ",
          Name(next), " input under ", Name(autocast_dtype),
          " autocast (a promote-list op takes f32 or the autocast dtype; "
          "cast the input first)"));
    }
  }
  return current;
}

absl::StatusOr<bool> ParseDisableAmpValue(absl::string_view value) {
  if (const std::optional<bool> on = ParseOnOff(value)) return *on;
  return absl::InvalidArgumentError(absl::StrCat(
      kDisableAmpEnv, "='", value,
      "' is not understood: use 1, true, yes or on to disable AMP, or 0, "
      "false, no, off or leave it unset"));
}

absl::Status AmpEnvironmentStatus() { return AmpEnvironment().status(); }

void SetAmpGloballyDisabled(bool disabled) { GlobalDisable() = disabled; }
bool AmpGloballyDisabled() { return GlobalDisable().load(); }

PrecisionChoice NarrowPrecision(const Device& device, MixrtOpClass op_class,
                                DType requested) {
  std::vector<DType> order = {requested};
  if (requested == DType::kF16)
    order = {DType::kF16, DType::kBF16, DType::kF32};
  if (requested == DType::kBF16) order = {DType::kBF16, DType::kF32};
  for (DType d : order) {
    const CapabilityEntry& cap = device.info().capability(op_class, d);
    if (cap.level == MIXRT_SUPPORT_UNSUPPORTED && d != DType::kF32) continue;
    if (d == requested) return {d, ""};
    const CapabilityEntry& asked =
        device.info().capability(op_class, requested);
    std::string why = absl::StrCat(Name(requested), " ", OpClassName(op_class),
                                   " is unsupported on ", device.ToString(),
                                   " (", asked.reason, "); running ", Name(d));
    WarnOnce(why);
    return {d, why};
  }
  return {DType::kF32, "no lower precision available"};
}

PrecisionChoice AutoPrecision(const Device& device, MixrtOpClass op_class) {
  DType best = DType::kF32;
  double best_speed = 1.0;
  std::string why =
      absl::StrCat("f32: no lower precision is native and faster for ",
                   OpClassName(op_class), " on ", device.ToString());
  for (DType d : {DType::kF16, DType::kBF16}) {
    const CapabilityEntry& cap = device.info().capability(op_class, d);
    if (cap.level != MIXRT_SUPPORT_NATIVE) continue;
    // Native but never measured (GPU tensor cores): assume a small gain.
    const double speed = cap.speed_vs_f32 > 0 ? cap.speed_vs_f32 : 1.01;
    if (speed > best_speed) {
      best = d;
      best_speed = speed;
      why = absl::StrFormat("%s: native, %s", Name(d),
                            cap.speed_vs_f32 > 0
                                ? absl::StrFormat("measured %.2fx f32", speed)
                                : std::string("not measured"));
    }
  }
  return {best, why};
}

absl::StatusOr<std::vector<Tensor>> AutocastInputs(absl::string_view op,
                                                   MixrtOpClass op_class,
                                                   std::vector<Tensor> inputs) {
  if (GlobalDisable().load() || t_state.empty()) return inputs;
  const Tensor* first = nullptr;
  for (const Tensor& t : inputs) {
    if (t.defined() && IsFloating(t.dtype())) {
      first = &t;
      break;
    }
  }
  if (first == nullptr) return inputs;
  const Device device = first->device();
  auto it = t_state.find(device.type());
  if (it == t_state.end() || !it->second.enabled) return inputs;
  // A misspelt switch must not leave the user unsure whether AMP ran.
  MIXRT_RETURN_IF_ERROR(AmpEnvironmentStatus());
  const DeviceState& state = it->second;
  const AutocastPolicyEntry entry = AutocastPolicyFor(device.type(), op);
  DType target = DType::kF32;  // Each case sets it; gcc cannot tell.
  std::string requested;
  std::string why;
  switch (entry.category) {
    case AutocastCategory::kUnlisted:
      return inputs;
    case AutocastCategory::kRefused:
      return absl::InvalidArgumentError(
          absl::StrCat(op, " is refused under autocast: ", entry.note));
    case AutocastCategory::kFloat32:
      target = DType::kF32;
      requested = "f32 (policy)";
      break;
    case AutocastCategory::kPromote: {
      MIXRT_ASSIGN_OR_RETURN(
          target, AutocastPromoteType(
                      state.dtype.value_or(DefaultAutocastDType(device.type())),
                      inputs));
      requested = "widest input (policy)";
      break;
    }
    case AutocastCategory::kLowerPrecision: {
      const DType asked =
          state.dtype.value_or(DefaultAutocastDType(device.type()));
      if (asked != DType::kF16 && asked != DType::kBF16 &&
          asked != DType::kF32) {
        return absl::InvalidArgumentError(
            absl::StrCat("autocast: dtype ", DTypeName(asked),
                         " is not a lower-precision float; use f16 or bf16"));
      }
      const PrecisionChoice choice =
          state.auto_precision ? AutoPrecision(device, op_class)
                               : NarrowPrecision(device, op_class, asked);
      target = choice.dtype;
      requested = state.auto_precision ? "auto" : Name(asked);
      why = choice.reason;
      break;
    }
  }
  for (Tensor& t : inputs) {
    if (!t.defined() || !IsFloating(t.dtype()) || t.device() != device ||
        t.dtype() == target) {
      continue;
    }
    MIXRT_ASSIGN_OR_RETURN(t, CastCached(t, target, state.cache_enabled));
  }
  if (t_logging) {
    t_log.push_back({std::string(op), device.ToString(), requested, target,
                     why.empty() ? "policy" : why});
  }
  return inputs;
}

void SetAutocastLogging(bool enabled) { t_logging = enabled; }

std::vector<AutocastDecision> TakeAutocastLog() {
  std::vector<AutocastDecision> log;
  log.swap(t_log);
  return log;
}

std::string FormatAutocastLog(const std::vector<AutocastDecision>& log) {
  std::string out = absl::StrFormat("%-34s %-10s %-22s %-5s %s\n", "op",
                                    "device", "requested", "ran", "why");
  for (const AutocastDecision& d : log) {
    absl::StrAppendFormat(&out, "%-34s %-10s %-22s %-5s %s\n", d.op, d.device,
                          d.requested, Name(d.ran), d.why);
  }
  return out;
}

std::vector<std::string> AutocastWarnings() {
  std::lock_guard<std::mutex> lock(g_warn_mu);
  return *g_warnings;
}

size_t AutocastCacheSize() { return t_cache.size(); }

}  // namespace mixrt
