#include "core/amp/grad_scaler.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "core/amp/autocast.h"
#include "core/functional/ops.h"
#include "core/kernels/amp_kernels.h"
#include "core/kernels/pointwise.h"
#include "core/status_macros.h"
#include "core/tensor/factories.h"

namespace mixrt {

GradScaler::GradScaler(Device device, GradScalerOptions options)
    : device_(device),
      options_(options),
      enabled_(options.enabled && !AmpGloballyDisabled()) {}

absl::Status GradScaler::LazyInit() {
  if (scale_.defined()) return absl::OkStatus();
  if (!(options_.growth_factor > 1) || !(options_.backoff_factor > 0) ||
      !(options_.backoff_factor < 1) || options_.growth_interval <= 0 ||
      !(options_.init_scale > 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("GradScaler: need init_scale > 0, growth_factor > 1, 0 < "
                     "backoff_factor < 1 and growth_interval > 0; got ",
                     options_.init_scale, ", ", options_.growth_factor, ", ",
                     options_.backoff_factor, ", ", options_.growth_interval));
  }
  MIXRT_ASSIGN_OR_RETURN(scale_,
                         full({1}, options_.init_scale, DType::kF32, device_));
  MIXRT_ASSIGN_OR_RETURN(growth_tracker_, zeros({1}, DType::kI32, device_));
  return absl::OkStatus();
}

absl::StatusOr<Tensor> GradScaler::scale(const Tensor& loss) {
  if (!enabled_) return loss;
  MIXRT_RETURN_IF_ERROR(LazyInit());
  if (!loss.defined() || loss.device() != device_) {
    return absl::InvalidArgumentError(absl::StrCat(
        "GradScaler.scale: the loss must be on the scaler's device ",
        device_.ToString()));
  }
  MIXRT_ASSIGN_OR_RETURN(Tensor s, scale_.reshape({}));
  MIXRT_ASSIGN_OR_RETURN(Tensor l32, cast(loss, DType::kF32));
  return mul(l32, s);
}

absl::Status GradScaler::unscale_(Optimizer& optimizer) {
  if (!enabled_) return absl::OkStatus();
  if (!scale_.defined()) {
    return absl::FailedPreconditionError(
        "unscale_() was called before scale(): no loss has been scaled by "
        "this GradScaler yet");
  }
  PerOptimizer& state = per_optimizer_[&optimizer];
  if (state.stage == Stage::kUnscaled) {
    return absl::FailedPreconditionError(
        "unscale_() has already been called on this optimizer since the last "
        "update().");
  }
  if (state.stage == Stage::kStepped) {
    return absl::FailedPreconditionError(
        "unscale_() is being called after step().");
  }
  std::vector<Tensor> grads;
  for (const Tensor& p : optimizer.params()) {
    const Tensor g = p.grad();
    if (!g.defined()) continue;
    if (g.dtype() == DType::kF16) {
      return absl::InvalidArgumentError(
          "Attempting to unscale FP16 gradients. Keep parameters in f32 "
          "(master weights) and let autocast cast them to f16 in the forward "
          "pass.");
    }
    grads.push_back(g);
  }
  MIXRT_ASSIGN_OR_RETURN(state.found_inf, zeros({1}, DType::kF32, device_));
  // inv_scale computed in double, as PyTorch does, then stored in f32.
  MIXRT_ASSIGN_OR_RETURN(Tensor inv_scale,
                         kernels::unary(MIXRT_UNARY_POW_SCALAR, scale_, -1.0));
  MIXRT_RETURN_IF_ERROR(kernels::non_finite_check_and_unscale_(
      grads, state.found_inf, inv_scale));
  state.stage = Stage::kUnscaled;
  return absl::OkStatus();
}

absl::Status GradScaler::step(Optimizer& optimizer) {
  if (!enabled_) return optimizer.Step();
  if (!scale_.defined()) {
    return absl::FailedPreconditionError(
        "step() was called before scale(): scale the loss with this "
        "GradScaler before backward");
  }
  PerOptimizer& state = per_optimizer_[&optimizer];
  if (state.stage == Stage::kStepped) {
    return absl::FailedPreconditionError(
        "step() has already been called since the last update().");
  }
  if (state.stage == Stage::kReady) MIXRT_RETURN_IF_ERROR(unscale_(optimizer));
  kernels::StepScaling scaling;
  scaling.found_inf = state.found_inf;
  MIXRT_RETURN_IF_ERROR(optimizer.Step(scaling));
  state.stage = Stage::kStepped;
  last_found_inf_ = state.found_inf;
  return absl::OkStatus();
}

absl::Status GradScaler::update(std::optional<double> new_scale) {
  if (!enabled_) return absl::OkStatus();
  if (new_scale.has_value()) {
    if (!(*new_scale > 0) || !std::isfinite(*new_scale)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "update(new_scale): need a positive finite scale, got ", *new_scale));
    }
    MIXRT_RETURN_IF_ERROR(LazyInit());
    MIXRT_ASSIGN_OR_RETURN(scale_, full({1}, *new_scale, DType::kF32, device_));
    per_optimizer_.clear();
    return absl::OkStatus();
  }
  Tensor found;
  for (const auto& [opt, state] : per_optimizer_) {
    if (!state.found_inf.defined()) continue;
    if (!found.defined()) {
      found = state.found_inf;
    } else {
      MIXRT_ASSIGN_OR_RETURN(found, kernels::add(found, state.found_inf));
    }
  }
  if (!found.defined()) {
    return absl::FailedPreconditionError(
        "No inf checks were recorded prior to update().");
  }
  MIXRT_RETURN_IF_ERROR(kernels::update_scale_(
      scale_, growth_tracker_, found, options_.growth_factor,
      options_.backoff_factor, options_.growth_interval));
  per_optimizer_.clear();
  return absl::OkStatus();
}

absl::StatusOr<double> GradScaler::get_scale() const {
  if (!enabled_) return 1.0;
  if (!scale_.defined()) return options_.init_scale;
  return scale_.item();
}

absl::StatusOr<bool> GradScaler::last_step_skipped() const {
  if (!last_found_inf_.defined()) return false;
  MIXRT_ASSIGN_OR_RETURN(double v, last_found_inf_.item());
  return v != 0;
}

absl::StatusOr<std::vector<size_t>> GradScaler::NonFiniteGradients(
    const Optimizer& optimizer) const {
  std::vector<size_t> bad;
  const std::vector<Tensor>& params = optimizer.params();
  for (size_t i = 0; i < params.size(); ++i) {
    const Tensor g = params[i].grad();
    if (!g.defined()) continue;
    MIXRT_ASSIGN_OR_RETURN(std::vector<double> v, g.to_double_vector());
    for (double x : v) {
      if (!std::isfinite(x)) {
        bad.push_back(i);
        break;
      }
    }
  }
  return bad;
}

absl::StatusOr<std::map<std::string, double>> GradScaler::state_dict() const {
  if (!enabled_) return std::map<std::string, double>{};
  MIXRT_ASSIGN_OR_RETURN(double s, get_scale());
  double tracker = 0;
  if (growth_tracker_.defined()) {
    MIXRT_ASSIGN_OR_RETURN(tracker, growth_tracker_.item());
  }
  return std::map<std::string, double>{
      {"scale", s},
      {"growth_factor", options_.growth_factor},
      {"backoff_factor", options_.backoff_factor},
      {"growth_interval", static_cast<double>(options_.growth_interval)},
      {"_growth_tracker", tracker}};
}

absl::Status GradScaler::load_state_dict(
    const std::map<std::string, double>& state) {
  if (state.empty()) {
    return absl::InvalidArgumentError(
        "The source state dict is empty, possibly because it was saved from "
        "a disabled instance of GradScaler.");
  }
  for (const char* key : {"scale", "growth_factor", "backoff_factor",
                          "growth_interval", "_growth_tracker"}) {
    if (state.find(key) == state.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat("GradScaler state dict lacks '", key, "'"));
    }
  }
  options_.growth_factor = state.at("growth_factor");
  options_.backoff_factor = state.at("backoff_factor");
  options_.growth_interval = static_cast<int>(state.at("growth_interval"));
  options_.init_scale = state.at("scale");
  scale_ = Tensor();
  MIXRT_RETURN_IF_ERROR(LazyInit());
  MIXRT_ASSIGN_OR_RETURN(growth_tracker_, full({1}, state.at("_growth_tracker"),
                                               DType::kI32, device_));
  return absl::OkStatus();
}

}  // namespace mixrt
