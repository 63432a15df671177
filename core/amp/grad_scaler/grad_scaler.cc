#include "core/amp/grad_scaler/grad_scaler.h"

#include <cmath>
#include <cstdio>
#include <limits>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "core/amp/autocast/autocast.h"
#include "core/functional/ops.h"
#include "core/kernels/amp_kernels.h"
#include "core/kernels/fill_copy.h"
#include "core/kernels/pointwise.h"
#include "core/tensor/factories.h"
#include "mixrt/status_macros.h"

namespace mixrt {

namespace {

// How often update() looks at the scale, and below what it has collapsed:
// the smallest positive f16 (2^-24), where f16 gradients scaled by it are
// all zero, and ~40 halvings from the default 2^16.
constexpr int64_t kCollapseCheckInterval = 64;
constexpr double kCollapsedScale = 5.9604644775390625e-08;

}  // namespace

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
  MIXRT_ASSIGN_OR_RETURN(one_, ones({1}, DType::kF32, device_));
  return absl::OkStatus();
}

absl::StatusOr<Tensor> GradScaler::scale(const Tensor& loss) {
  MIXRT_RETURN_IF_ERROR(AmpEnvironmentStatus());
  if (!enabled_) return loss;
  MIXRT_RETURN_IF_ERROR(LazyInit());
  if (!loss.defined() || loss.device() != device_) {
    return absl::InvalidArgumentError(absl::StrCat(
        "GradScaler.scale: the loss must be on the scaler's device ",
        device_.ToString()));
  }
  MIXRT_ASSIGN_OR_RETURN(Tensor s, scale_.reshape({}));
  MIXRT_ASSIGN_OR_RETURN(Tensor l32, cast(loss, DType::kF32));
  if (loss.numel() == 1) last_loss_ = loss.detach();
  return mul(l32, s);
}

absl::StatusOr<std::vector<Tensor>> GradScaler::scale(
    const std::vector<Tensor>& outputs) {
  std::vector<Tensor> scaled;
  scaled.reserve(outputs.size());
  for (const Tensor& t : outputs) {
    MIXRT_ASSIGN_OR_RETURN(Tensor s, scale(t));
    scaled.push_back(std::move(s));
  }
  return scaled;
}

absl::Status GradScaler::CheckScaled(absl::string_view call) const {
  if (scale_.defined()) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrCat(
      "Attempted ", call,
      " but _scale is None.  This may indicate your script did not use "
      "scaler.scale(loss or outputs) earlier in the iteration."));
}

absl::Status GradScaler::unscale_(Optimizer& optimizer) {
  if (!enabled_) return absl::OkStatus();
  MIXRT_RETURN_IF_ERROR(CheckScaled("unscale_"));
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
  state.stage = Stage::kUnscaled;
  if (grads.empty()) {
    // Peers reducing found_inf expect this rank's verdict even so.
    if (found_inf_reducer_) {
      MIXRT_ASSIGN_OR_RETURN(Tensor none, zeros({1}, DType::kF32, device_));
      MIXRT_RETURN_IF_ERROR(found_inf_reducer_(none));
    }
    // No gradients, no inf check: step() refuses the optimizer, as
    // PyTorch's does, instead of counting a clean step.
    return absl::OkStatus();
  }
  MIXRT_ASSIGN_OR_RETURN(state.found_inf, zeros({1}, DType::kF32, device_));
  // PyTorch takes the reciprocal in f64 and rounds it to f32; an f32
  // division is correctly rounded too, so the two agree bit for bit.
  // one_ is made once: a fill per step was a tenth of a small model's
  // unscale.
  MIXRT_ASSIGN_OR_RETURN(Tensor inv_scale, kernels::div(one_, scale_));
  MIXRT_RETURN_IF_ERROR(kernels::non_finite_check_and_unscale_(
      grads, state.found_inf, inv_scale));
  if (found_inf_reducer_) {
    MIXRT_RETURN_IF_ERROR(found_inf_reducer_(state.found_inf));
  }
  return absl::OkStatus();
}

absl::Status GradScaler::step(Optimizer& optimizer) {
  if (!enabled_) return optimizer.step();
  MIXRT_RETURN_IF_ERROR(CheckScaled("step"));
  PerOptimizer& state = per_optimizer_[&optimizer];
  if (state.stage == Stage::kStepped) {
    return absl::FailedPreconditionError(
        "step() has already been called since the last update().");
  }
  if (state.stage == Stage::kReady) MIXRT_RETURN_IF_ERROR(unscale_(optimizer));
  if (!state.found_inf.defined()) {
    return absl::FailedPreconditionError(
        "No inf checks were recorded for this optimizer.");
  }
  kernels::StepScaling scaling;
  scaling.found_inf = state.found_inf;
  MIXRT_RETURN_IF_ERROR(optimizer.step(scaling));
  state.stage = Stage::kStepped;
  last_found_inf_ = state.found_inf;
  return absl::OkStatus();
}

void GradScaler::EndIteration() { per_optimizer_.clear(); }

absl::Status GradScaler::update(double new_scale) {
  if (!enabled_) return absl::OkStatus();
  MIXRT_RETURN_IF_ERROR(CheckScaled("update"));
  if (!(new_scale > 0) || !std::isfinite(new_scale)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "update(new_scale): need a positive finite scale, got ", new_scale));
  }
  MIXRT_RETURN_IF_ERROR(kernels::fill_(scale_, new_scale));
  EndIteration();
  return absl::OkStatus();
}

absl::Status GradScaler::update(const Tensor& new_scale) {
  if (!enabled_) return absl::OkStatus();
  MIXRT_RETURN_IF_ERROR(CheckScaled("update"));
  if (!new_scale.defined() || new_scale.device() != device_ ||
      new_scale.numel() != 1 || new_scale.requires_grad()) {
    return absl::InvalidArgumentError(
        "new_scale should be a float or a 1-element torch.cuda.FloatTensor "
        "or torch.FloatTensor with requires_grad=False.");
  }
  MIXRT_ASSIGN_OR_RETURN(Tensor s, new_scale.to(DType::kF32));
  MIXRT_ASSIGN_OR_RETURN(s, s.reshape({1}));
  MIXRT_RETURN_IF_ERROR(kernels::copy_(scale_, s));
  EndIteration();
  return absl::OkStatus();
}

absl::Status GradScaler::update() {
  if (!enabled_) return absl::OkStatus();
  MIXRT_RETURN_IF_ERROR(CheckScaled("update"));
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
        "No inf checks were recorded prior to update.");
  }
  MIXRT_RETURN_IF_ERROR(kernels::update_scale_(
      scale_, growth_tracker_, found, options_.growth_factor,
      options_.backoff_factor, options_.growth_interval));
  EndIteration();
  ++updates_;
  if (updates_ % kCollapseCheckInterval == 0) return CheckForCollapse();
  return absl::OkStatus();
}

absl::Status GradScaler::CheckForCollapse() {
  if (last_loss_.defined()) {
    MIXRT_ASSIGN_OR_RETURN(const double loss, last_loss_.item());
    if (std::isfinite(loss)) {
      last_finite_loss_ = loss;
      last_finite_loss_update_ = updates_;
    }
  }
  if (warned_collapse_) return absl::OkStatus();
  MIXRT_ASSIGN_OR_RETURN(const double scale, scale_.item());
  if (scale >= kCollapsedScale) return absl::OkStatus();
  warned_collapse_ = true;
  const int64_t halvings =
      static_cast<int64_t>(std::ceil(std::log(options_.init_scale / scale) /
                                     std::log(1 / options_.backoff_factor)));
  std::fprintf(stderr,
               "mixrt GradScaler: warning: the loss scale has collapsed to %g "
               "after %lld updates "
               "(at least %lld backoffs from %g): nearly every step overflowed "
               "(inf/NaN gradients) "
               "and was skipped, so training has stalled. %s Look for the "
               "source of the inf/NaN "
               "(MIXRT_DISABLE_AMP=1 runs without AMP to compare).\n",
               scale, static_cast<long long>(updates_),
               static_cast<long long>(halvings), options_.init_scale,
               last_finite_loss_.has_value()
                   ? absl::StrCat("The last finite loss seen (checked every ",
                                  kCollapseCheckInterval, " updates) was ",
                                  *last_finite_loss_, " at update ",
                                  last_finite_loss_update_, ".")
                         .c_str()
                   : "No finite loss was seen at the checks.");
  return absl::OkStatus();
}

absl::StatusOr<double> GradScaler::get_scale() const {
  if (!enabled_) return 1.0;
  if (!scale_.defined()) return options_.init_scale;
  return scale_.item();
}

absl::StatusOr<int> GradScaler::get_growth_tracker() const {
  if (!enabled_ || !growth_tracker_.defined()) return 0;
  MIXRT_ASSIGN_OR_RETURN(double v, growth_tracker_.item());
  return static_cast<int>(v);
}

absl::StatusOr<bool> GradScaler::last_step_skipped() const {
  if (!last_found_inf_.defined()) return false;
  MIXRT_ASSIGN_OR_RETURN(double v, last_found_inf_.item());
  return v != 0;
}

absl::StatusOr<std::vector<size_t>> GradScaler::non_finite_gradients(
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

absl::Status GradScaler::check_state_dict(
    const std::map<std::string, double>& state) const {
  if (!enabled_) return absl::OkStatus();
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
  const auto bad = [](absl::string_view key, double v, absl::string_view want) {
    return absl::InvalidArgumentError(absl::StrCat(
        "GradScaler state dict: '", key, "' is ", v, "; expected ", want));
  };
  const double scale = state.at("scale");
  if (!(scale > 0) || !std::isfinite(scale)) {
    return bad("scale", scale, "a finite value > 0");
  }
  const double growth = state.at("growth_factor");
  if (!(growth > 1) || !std::isfinite(growth)) {
    return bad("growth_factor", growth, "a finite value > 1");
  }
  const double backoff = state.at("backoff_factor");
  if (!(backoff > 0 && backoff < 1)) {
    return bad("backoff_factor", backoff, "a value in (0, 1)");
  }
  const double interval = state.at("growth_interval");
  if (!(interval >= 1 && interval <= std::numeric_limits<int32_t>::max()) ||
      interval != std::floor(interval)) {
    return bad("growth_interval", interval, "an integer in [1, 2^31)");
  }
  const double tracker = state.at("_growth_tracker");
  if (!(tracker >= 0 && tracker < interval) || tracker != std::floor(tracker)) {
    return bad("_growth_tracker", tracker,
               "an integer in [0, growth_interval)");
  }
  return absl::OkStatus();
}

absl::Status GradScaler::load_state_dict(
    const std::map<std::string, double>& state) {
  if (!enabled_) return absl::OkStatus();  // As PyTorch: nothing to load.
  MIXRT_RETURN_IF_ERROR(check_state_dict(state));
  MIXRT_ASSIGN_OR_RETURN(Tensor tracker, full({1}, state.at("_growth_tracker"),
                                              DType::kI32, device_));
  GradScalerOptions options = options_;
  options.growth_factor = state.at("growth_factor");
  options.backoff_factor = state.at("backoff_factor");
  options.growth_interval = static_cast<int>(state.at("growth_interval"));
  options.init_scale = state.at("scale");
  const GradScalerOptions old = options_;
  options_ = options;
  const Tensor old_scale = scale_;
  scale_ = Tensor();
  if (absl::Status init = LazyInit(); !init.ok()) {
    options_ = old;
    scale_ = old_scale;
    return init;
  }
  growth_tracker_ = tracker;
  return absl::OkStatus();
}

}  // namespace mixrt
