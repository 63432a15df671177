// Autocast: per-op precision chosen from a policy table, like torch.autocast.
//
//   {
//     mixrt::AutocastGuard autocast("cpu", mixrt::DType::kBF16);
//     y = *mixrt::linear(x, w, b);   // runs in bf16 (lower-precision list)
//     loss = *mixrt::mse_loss(y, t); // runs in f32 (f32 list)
//   }
//
// State is per thread and per device type; guards nest and restore the
// previous state. The requested dtype is narrowed by what the device can do
// (its plugin's capability matrix): an unsupported dtype falls back along
// f16 -> bf16 -> f32 for that op, with one warning per (device, dtype,
// reason) and a queryable record.
#ifndef MIXRT_CORE_AMP_AUTOCAST_AUTOCAST_H_
#define MIXRT_CORE_AMP_AUTOCAST_AUTOCAST_H_

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "core/dtype.h"
#include "core/plugin/device.h"
#include "core/tensor/tensor.h"
#include "mixrt/plugin_api.h"

namespace mixrt {

// What autocast does when a guard asks for no particular dtype.
DType DefaultAutocastDType(
    absl::string_view device_type);  // cuda f16, cpu bf16

// Unset fields inherit from the enclosing guard of the same device type, as
// torch.autocast's dtype=None and cache_enabled=None do; the outermost guard
// falls back to DefaultAutocastDType and a cache that is on.
struct AutocastOptions {
  std::optional<DType> dtype;
  bool auto_precision = false;  // Per op class, the fastest native dtype.
  bool enabled = true;
  std::optional<bool> cache_enabled;
  // How the region's lower-precision linears and matmuls produce their
  // weight (second operand) and bias gradients. false (the default): in
  // f32, the GEMM's own accumulator, one rounding fewer before the f32
  // master weights, so a gradient past f16's range (65504) stays finite
  // and the GradScaler steps where PyTorch would skip. true: PyTorch's
  // way, in the lower precision (rounded, and overflowing, there) and
  // widened after, so the scaler sees every overflow PyTorch sees and
  // skips and backs off on the same steps. Unset: the enclosing guard's.
  std::optional<bool> low_precision_weight_gradients;
};

// A CPU guard asking for a dtype other than bf16 or f16 warns and disables
// autocast for its region, as torch.autocast("cpu") does.
class AutocastGuard {
 public:
  explicit AutocastGuard(std::string device_type, AutocastOptions options = {});
  AutocastGuard(std::string device_type, DType dtype, bool enabled = true,
                std::optional<bool> cache_enabled = std::nullopt);
  ~AutocastGuard();
  AutocastGuard(const AutocastGuard&) = delete;
  AutocastGuard& operator=(const AutocastGuard&) = delete;

 private:
  struct Saved;
  std::string device_type_;
  std::unique_ptr<Saved> saved_;
};

// This thread's whole autocast state (every device type's enabled flag,
// dtype and cache flag), captured so that code re-run later makes the same
// precision choices: gradient checkpointing recomputes a forward inside
// backward, where no guard of the original forward is active.
class AutocastState {
 public:
  struct Data;
  std::shared_ptr<const Data> data;
};
AutocastState CaptureAutocastState();

// Installs a captured state for its scope; the previous one comes back.
class AutocastStateGuard {
 public:
  explicit AutocastStateGuard(const AutocastState& state);
  ~AutocastStateGuard();
  AutocastStateGuard(const AutocastStateGuard&) = delete;
  AutocastStateGuard& operator=(const AutocastStateGuard&) = delete;

 private:
  AutocastState previous_;
};

// Within its scope this thread's autocast casts neither use nor fill the
// weight-cast cache: a tracing compiler must see every cast as a launch of
// its graph (a cached cast would be a constant, stale once its weight or
// input changes).
class AutocastCacheBypass {
 public:
  AutocastCacheBypass();
  ~AutocastCacheBypass();
  AutocastCacheBypass(const AutocastCacheBypass&) = delete;
  AutocastCacheBypass& operator=(const AutocastCacheBypass&) = delete;
};

// This thread's autocast state as text (every device type's enabled flag,
// dtype, automatic choice and cache flag): equal strings, equal precision
// choices. What compiled graphs guard on.
std::string AutocastStateKey();

bool AutocastEnabled(absl::string_view device_type);
// The dtype lower-precision ops run in under the innermost guard for
// `device_type` (DefaultAutocastDType outside any guard), and whether that
// guard caches weight casts; torch.get_autocast_dtype and
// torch.is_autocast_cache_enabled.
DType AutocastDType(absl::string_view device_type);
bool AutocastCacheEnabled(absl::string_view device_type);
// Whether autocast is on for `device_type` and its innermost guard asks
// for weight gradients in the lower precision
// (AutocastOptions::low_precision_weight_gradients).
bool AutocastLowPrecisionWeightGradients(absl::string_view device_type);

// The dtype a promote-list op (cat, stack, ...) runs in: PyTorch's
// at::autocast::promote_type. It starts from the autocast dtype; any f32
// input makes it f32; an input in a lower-precision dtype other than the
// autocast dtype is an error. Non-floating and undefined inputs are ignored.
absl::StatusOr<DType> AutocastPromoteType(DType autocast_dtype,
                                          absl::Span<const Tensor> inputs);

// Troubleshooting switch from the AMP guides: with it on (or with
// MIXRT_DISABLE_AMP set to 1, true, yes or on in the environment) autocast
// and the grad scaler do nothing anywhere, to check whether AMP causes a
// problem.
inline constexpr char kDisableAmpEnv[] = "MIXRT_DISABLE_AMP";
void SetAmpGloballyDisabled(bool disabled);
bool AmpGloballyDisabled();
// true for 1/true/yes/on, false for 0/false/no/off/empty (any case);
// InvalidArgument naming the accepted values otherwise.
absl::StatusOr<bool> ParseDisableAmpValue(absl::string_view value);
// The error for an unrecognised MIXRT_DISABLE_AMP, which every autocast
// region and scaler then returns (AMP is neither silently on nor off).
absl::Status AmpEnvironmentStatus();

// The inputs of op `op` (of class `op_class`) as autocast wants them: cast
// (with autograd history) when autocast is on for their device type and
// the policy says so. Undefined and non-floating tensors pass through.
absl::StatusOr<std::vector<Tensor>> AutocastInputs(absl::string_view op,
                                                   MixrtOpClass op_class,
                                                   std::vector<Tensor> inputs);

// The dtype `device` runs `op_class` in when `requested` is asked for,
// and why (empty when it is the request).
struct PrecisionChoice {
  DType dtype;
  std::string reason;
};
PrecisionChoice NarrowPrecision(const Device& device, MixrtOpClass op_class,
                                DType requested);
// For precision=auto: the fastest dtype the device reports native for
// `op_class`, f32 where lower precision is measured slower or unsupported.
PrecisionChoice AutoPrecision(const Device& device, MixrtOpClass op_class);

// ---- Explaining precision decisions ----
struct AutocastDecision {
  std::string op;
  std::string device;
  std::string requested;  // "bf16", "f32 (policy)", ...
  DType ran;
  std::string why;
};
// Opt-in, per thread: record every decision until disabled.
void SetAutocastLogging(bool enabled);
std::vector<AutocastDecision> TakeAutocastLog();
std::string FormatAutocastLog(const std::vector<AutocastDecision>& log);
// Every distinct narrowing warning issued so far in this process.
std::vector<std::string> AutocastWarnings();

// Number of entries in this thread's weight-cast cache (for tests).
size_t AutocastCacheSize();

}  // namespace mixrt

#endif  // MIXRT_CORE_AMP_AUTOCAST_AUTOCAST_H_
