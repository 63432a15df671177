// The gradient scaler, with torch.amp.GradScaler's semantics, trajectory
// and error texts:
//
//   mixrt::GradScaler scaler(device);
//   // ... forward under autocast ...
//   MIXRT_RETURN_IF_ERROR(scaler.scale(loss)->backward());
//   // Optional, before clipping:
//   MIXRT_RETURN_IF_ERROR(scaler.unscale_(optimizer));
//   // Skipped on inf/NaN:
//   MIXRT_RETURN_IF_ERROR(scaler.step(optimizer));
//   MIXRT_RETURN_IF_ERROR(scaler.update());
//
// The scale, the growth tracker and each optimizer's found_inf live on the
// device; checks and updates are backend kernels, and a skipped step is
// decided on the device too (no host synchronization per step).
//
// One deliberate difference from PyTorch, by default: the weight
// gradients of f16/bf16 matmuls come out in f32 here (PyTorch produces them
// in the low precision and converts). A gradient that overflows f16 in
// PyTorch before reaching the f32 .grad may stay finite here, so mixrt
// skips fewer steps, never more; with no overflow, the scale trajectories
// are identical. It is the default because the gradient is the GEMM's f32
// accumulator, one rounding closer to the truth, and a finite gradient is
// a step PyTorch throws away. AutocastOptions::low_precision_weight_gradients
// gives PyTorch's behaviour (rounded and overflowing in the low precision,
// then widened): the same skipped steps and scale as PyTorch's.
#ifndef MIXRT_CORE_AMP_GRAD_SCALER_GRAD_SCALER_H_
#define MIXRT_CORE_AMP_GRAD_SCALER_GRAD_SCALER_H_

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/optim/optimizer.h"
#include "core/plugin/device.h"
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
  // loss * scale (differentiable, f32); the loss itself when disabled.
  absl::StatusOr<Tensor> scale(const Tensor& loss);
  // Each output times the scale (PyTorch's scale() of an iterable).
  absl::StatusOr<std::vector<Tensor>> scale(const std::vector<Tensor>& outputs);
  // Divides the optimizer's gradients by the scale, in place, and records
  // whether any is inf or NaN. At most once per optimizer between updates.
  absl::Status unscale_(Optimizer& optimizer);
  // Unscales if needed, then steps unless an inf/NaN was found.
  absl::Status step(Optimizer& optimizer);
  // Backs the scale off if any optimizer found inf/NaN since the last
  // update, grows it after growth_interval clean steps.
  absl::Status update();
  // Sets the scale to `new_scale` instead (a number, or a one-element f32
  // tensor on the scaler's device without requires_grad).
  absl::Status update(double new_scale);
  absl::Status update(const Tensor& new_scale);
  // The current scale (reads it from the device); 1 when disabled.
  absl::StatusOr<double> get_scale() const;
  // PyTorch's _get_growth_tracker: clean steps since the last change.
  absl::StatusOr<int> get_growth_tracker() const;

  double get_growth_factor() const { return options_.growth_factor; }
  void set_growth_factor(double factor) { options_.growth_factor = factor; }
  double get_backoff_factor() const { return options_.backoff_factor; }
  void set_backoff_factor(double factor) { options_.backoff_factor = factor; }
  int get_growth_interval() const { return options_.growth_interval; }
  void set_growth_interval(int interval) {
    options_.growth_interval = interval;
  }
  // Called by unscale_ with the optimizer's found_inf (f32 [1], 0 or
  // more), which it may change in place before step() reads it: how ranks
  // that unscale different gradients agree on skipping a step
  // (distributed::SyncFoundInf). Called on every unscale_, even one that
  // found no gradients, so that every rank takes part.
  void set_found_inf_reducer(
      std::function<absl::Status(const Tensor& found_inf)> reducer) {
    found_inf_reducer_ = std::move(reducer);
  }

  // Whether the last step() was skipped (reads found_inf from the device).
  absl::StatusOr<bool> last_step_skipped() const;

  // Indices (into optimizer.params()) of gradients that are not finite,
  // after unscale_ (the troubleshooting check from the AMP guide).
  absl::StatusOr<std::vector<size_t>> non_finite_gradients(
      const Optimizer& optimizer) const;

  // PyTorch's keys: scale, growth_factor, backoff_factor, growth_interval,
  // _growth_tracker.
  absl::StatusOr<std::map<std::string, double>> state_dict() const;
  // Refuses (changing nothing) a state with a missing key, a non-finite or
  // non-positive scale, growth_factor <= 1, backoff_factor outside (0, 1),
  // or a non-integer growth_interval / _growth_tracker out of range.
  absl::Status load_state_dict(const std::map<std::string, double>& state);
  absl::Status check_state_dict(
      const std::map<std::string, double>& state) const;

 private:
  enum class Stage { kReady, kUnscaled, kStepped };
  struct PerOptimizer {
    Stage stage = Stage::kReady;
    Tensor found_inf;  // f32 [1]
  };

  absl::Status LazyInit();
  // PyTorch's _check_scale_growth_tracker: an error naming `call` before
  // the first scale().
  absl::Status CheckScaled(absl::string_view call) const;
  // Every optimizer starts the next iteration ready (PyTorch resets
  // _per_optimizer_states at the end of update()).
  void EndIteration();
  // Every kCollapseCheckInterval updates, reads the scale (one host wait)
  // and warns once when it has collapsed: training that has overflowed
  // step after step learns nothing, and says nothing else.
  absl::Status CheckForCollapse();

  Device device_;
  GradScalerOptions options_;
  bool enabled_;
  Tensor scale_;           // f32 [1]
  Tensor growth_tracker_;  // i32 [1]
  Tensor one_;             // f32 [1], 1: the numerator of 1 / scale.
  absl::flat_hash_map<const Optimizer*, PerOptimizer> per_optimizer_;
  Tensor last_found_inf_;
  std::function<absl::Status(const Tensor&)> found_inf_reducer_;
  int64_t updates_ = 0;
  Tensor last_loss_;  // The loss last scaled, read at the collapse checks.
  std::optional<double> last_finite_loss_;
  int64_t last_finite_loss_update_ = 0;
  bool warned_collapse_ = false;
};

}  // namespace mixrt

#endif  // MIXRT_CORE_AMP_GRAD_SCALER_GRAD_SCALER_H_
