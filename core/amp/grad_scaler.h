// The gradient scaler, with torch.amp.GradScaler's semantics:
//
//   mixrt::GradScaler scaler(device);
//   ... forward under autocast ...
//   MIXRT_RETURN_IF_ERROR(scaler.scale(loss)->backward());
//   MIXRT_RETURN_IF_ERROR(scaler.unscale_(optimizer));  // optional, for
//   clipping MIXRT_RETURN_IF_ERROR(scaler.step(optimizer));      // skipped on
//   inf/NaN MIXRT_RETURN_IF_ERROR(scaler.update());
//
// The scale, the growth tracker and each optimizer's found_inf live on the
// device; checks and updates are backend kernels, and a skipped step is
// decided on the device too (no host synchronization per step).
#ifndef MIXRT_CORE_AMP_GRAD_SCALER_H_
#define MIXRT_CORE_AMP_GRAD_SCALER_H_

#include <map>
#include <optional>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "core/plugin/device.h"
#include "core/optim/optimizer.h"
#include "core/tensor/tensor.h"

namespace mixrt {

struct GradScalerOptions {
  double init_scale = 65536.0;  // 2^16
  double growth_factor = 2.0;
  double backoff_factor = 0.5;
  int growth_interval = 2000;
  bool enabled = true;
};

class GradScaler {
 public:
  GradScaler(Device device, GradScalerOptions options = {});

  bool is_enabled() const { return enabled_; }
  // loss * scale (differentiable); the loss itself when disabled.
  absl::StatusOr<Tensor> scale(const Tensor& loss);
  // Divides the optimizer's gradients by the scale, in place, and records
  // whether any is inf or NaN. At most once per optimizer between updates.
  absl::Status unscale_(Optimizer& optimizer);
  // Unscales if needed, then steps unless an inf/NaN was found.
  absl::Status step(Optimizer& optimizer);
  // Backs the scale off if any optimizer found inf/NaN since the last
  // update, grows it after growth_interval clean steps.
  absl::Status update(std::optional<double> new_scale = std::nullopt);
  // The current scale (reads it from the device); 1 when disabled.
  absl::StatusOr<double> get_scale() const;
  // Whether the last step() was skipped (reads found_inf from the device).
  absl::StatusOr<bool> last_step_skipped() const;

  // Indices (into optimizer.params()) of gradients that are not finite,
  // after unscale_ (the troubleshooting check from the AMP guide).
  absl::StatusOr<std::vector<size_t>> NonFiniteGradients(
      const Optimizer& optimizer) const;

  // PyTorch's keys: scale, growth_factor, backoff_factor, growth_interval,
  // _growth_tracker.
  absl::StatusOr<std::map<std::string, double>> state_dict() const;
  absl::Status load_state_dict(const std::map<std::string, double>& state);

 private:
  enum class Stage { kReady, kUnscaled, kStepped };
  struct PerOptimizer {
    Stage stage = Stage::kReady;
    Tensor found_inf;  // f32 [1]
  };

  absl::Status LazyInit();

  Device device_;
  GradScalerOptions options_;
  bool enabled_;
  Tensor scale_;           // f32 [1]
  Tensor growth_tracker_;  // i32 [1]
  absl::flat_hash_map<const Optimizer*, PerOptimizer> per_optimizer_;
  Tensor last_found_inf_;
};

}  // namespace mixrt

#endif  // MIXRT_CORE_AMP_GRAD_SCALER_H_
