#include "core/optim/optimizer.h"

#include <cmath>
#include <optional>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "core/kernels/amp_kernels.h"
#include "core/kernels/fill_copy.h"
#include "core/kernels/pointwise.h"
#include "core/kernels/reduce.h"
#include "core/tensor/capture_hooks.h"
#include "core/tensor/factories.h"
#include "mixrt/status_macros.h"

namespace mixrt {

absl::Status CheckLearningRate(double lr) {
  // "!(lr >= 0)" also catches NaN, as PyTorch's "not 0.0 <= lr" does.
  if (!(lr >= 0) || !std::isfinite(lr)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "Invalid learning rate: ", lr, " (expected a finite value >= 0)"));
  }
  return absl::OkStatus();
}

namespace {

// The gradient a step takes: torch's maximize negates it (exactly, so an
// ascending step is bit for bit the descending step on -grad; the found-inf
// check already ran on the gradient itself).
absl::StatusOr<Tensor> StepGradient(const Tensor& grad, bool maximize) {
  if (!maximize) return grad;
  return kernels::neg(grad);
}

absl::Status CheckNonNegative(double v, absl::string_view what) {
  if (!(v >= 0) || !std::isfinite(v)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "Invalid ", what, " value: ", v, " (expected a finite value >= 0)"));
  }
  return absl::OkStatus();
}

absl::Status CheckBeta(double beta, int index) {
  if (!(beta >= 0 && beta < 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("Invalid beta parameter at index ", index, ": ", beta,
                     " (expected 0 <= beta < 1)"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status CheckSgdOptions(const SgdOptions& o) {
  MIXRT_RETURN_IF_ERROR(CheckLearningRate(o.lr));
  MIXRT_RETURN_IF_ERROR(CheckNonNegative(o.momentum, "momentum"));
  MIXRT_RETURN_IF_ERROR(CheckNonNegative(o.dampening, "dampening"));
  MIXRT_RETURN_IF_ERROR(CheckNonNegative(o.weight_decay, "weight_decay"));
  if (o.nesterov && (o.momentum <= 0 || o.dampening != 0)) {
    return absl::InvalidArgumentError(
        "Nesterov momentum requires a momentum and zero dampening");
  }
  return absl::OkStatus();
}

absl::Status CheckAdamWOptions(const AdamWOptions& o) {
  MIXRT_RETURN_IF_ERROR(CheckLearningRate(o.lr));
  MIXRT_RETURN_IF_ERROR(CheckNonNegative(o.eps, "epsilon"));
  MIXRT_RETURN_IF_ERROR(CheckBeta(o.beta1, 0));
  MIXRT_RETURN_IF_ERROR(CheckBeta(o.beta2, 1));
  return CheckNonNegative(o.weight_decay, "weight_decay");
}

namespace {

std::vector<ParamGroup> OneGroup(std::vector<Tensor> params) {
  std::vector<ParamGroup> groups(1);
  groups[0].params = std::move(params);
  return groups;
}

// What PyTorch's add_param_group refuses: a bad lr or weight decay, a
// parameter in two groups.
absl::Status CheckGroups(const std::vector<ParamGroup>& groups) {
  std::vector<const Tensor*> seen;
  for (size_t g = 0; g < groups.size(); ++g) {
    if (groups[g].lr.has_value()) {
      MIXRT_RETURN_IF_ERROR(CheckLearningRate(*groups[g].lr));
    }
    if (groups[g].weight_decay.has_value()) {
      MIXRT_RETURN_IF_ERROR(
          CheckNonNegative(*groups[g].weight_decay, "weight_decay"));
    }
    for (const Tensor& p : groups[g].params) {
      for (const Tensor* q : seen) {
        if (q->is_same(p)) {
          return absl::InvalidArgumentError(absl::StrCat(
              "some parameters appear in more than one parameter group (group ",
              g, ")"));
        }
      }
      seen.push_back(&p);
    }
  }
  return absl::OkStatus();
}

}  // namespace

Optimizer::Optimizer(std::vector<Tensor> params, double lr, double weight_decay)
    : Optimizer(OneGroup(std::move(params)), lr, weight_decay) {}

Optimizer::Optimizer(std::vector<ParamGroup> groups, double lr,
                     double weight_decay)
    : default_lr_(lr) {
  options_status_ = CheckGroups(groups);
  for (ParamGroup& g : groups) {
    Group group;
    group.begin = params_.size();
    for (Tensor& p : g.params) params_.push_back(std::move(p));
    group.end = params_.size();
    group.lr = g.lr.value_or(lr);
    group.weight_decay = g.weight_decay.value_or(weight_decay);
    groups_.push_back(group);
  }
}

const Optimizer::Group& Optimizer::GroupOf(size_t i) const {
  for (const Group& g : groups_) {
    if (i < g.end) return g;
  }
  return groups_.back();  // Not reached: every parameter is in a group.
}

std::vector<Tensor> Optimizer::group_params(size_t group) const {
  const Group& g = groups_.at(group);
  return std::vector<Tensor>(params_.begin() + g.begin,
                             params_.begin() + g.end);
}

absl::Status Optimizer::set_lr(double lr) {
  MIXRT_RETURN_IF_ERROR(CheckLearningRate(lr));
  for (Group& g : groups_) g.lr = lr;
  default_lr_ = lr;
  return absl::OkStatus();
}

absl::Status Optimizer::set_group_lr(size_t group, double lr) {
  if (group >= groups_.size()) {
    return absl::OutOfRangeError(absl::StrCat(
        "param group ", group, " does not exist (", groups_.size(), ")"));
  }
  MIXRT_RETURN_IF_ERROR(CheckLearningRate(lr));
  groups_[group].lr = lr;
  return absl::OkStatus();
}

double Optimizer::initial_lr(size_t group) {
  if (groups_.empty()) return default_lr_;
  for (Group& g : groups_) {
    if (!g.initial_lr.has_value()) g.initial_lr = g.lr;
  }
  return *groups_.at(group).initial_lr;
}

absl::StatusOr<double> Optimizer::momentum() const {
  return absl::UnimplementedError(
      "this optimizer has no momentum (or beta1) to cycle");
}

absl::Status Optimizer::set_momentum(double) { return momentum().status(); }

absl::Status SGD::set_momentum(double momentum) {
  SgdOptions changed = options_;
  changed.momentum = momentum;
  MIXRT_RETURN_IF_ERROR(CheckSgdOptions(changed));
  options_ = changed;
  return absl::OkStatus();
}

absl::Status AdamW::set_momentum(double beta1) {
  AdamWOptions changed = options_;
  changed.beta1 = beta1;
  MIXRT_RETURN_IF_ERROR(CheckAdamWOptions(changed));
  options_ = changed;
  return absl::OkStatus();
}

void Optimizer::zero_grad() {
  for (Tensor& p : params_) p.set_grad(Tensor());
}

absl::Status Optimizer::CheckParam(const Tensor& p) const {
  if (p.dtype() != DType::kF32) {
    return absl::InvalidArgumentError(
        absl::StrCat("optimizer: parameters must be f32 master weights, got ",
                     DTypeName(p.dtype()),
                     " (keep parameters in f32 and let autocast cast them)"));
  }
  if (p.grad().defined() && p.grad().device() != p.device()) {
    return absl::InvalidArgumentError(
        absl::StrCat("optimizer: a parameter on ", p.device().ToString(),
                     " has a gradient on ", p.grad().device().ToString()));
  }
  if (!params_.empty() && p.device() != params_[0].device()) {
    return absl::InvalidArgumentError(
        absl::StrCat("optimizer: parameters on two devices (",
                     params_[0].device().ToString(), " and ",
                     p.device().ToString(), "); use one optimizer per device"));
  }
  return absl::OkStatus();
}

absl::Status Optimizer::BeginStep() const {
  ReportUntraceable(
      "an optimizer step (its step count and learning rate are host values "
      "a replay would repeat)");
  MIXRT_RETURN_IF_ERROR(options_status_);
  // Validate everything first: a bad parameter leaves all state unchanged.
  for (const Tensor& p : params_) MIXRT_RETURN_IF_ERROR(CheckParam(p));
  return absl::OkStatus();
}

absl::StatusOr<bool> Optimizer::SkippedBeforeStateExists(
    const kernels::StepScaling& scaling, bool creates_state) {
  if (!creates_state || !scaling.found_inf.defined()) return false;
  MIXRT_ASSIGN_OR_RETURN(double found_inf, scaling.found_inf.item());
  return found_inf != 0;
}

SGD::SGD(std::vector<Tensor> params, SgdOptions options)
    : SGD(OneGroup(std::move(params)), options) {}

SGD::SGD(std::vector<ParamGroup> groups, SgdOptions options)
    : Optimizer(std::move(groups), options.lr, options.weight_decay),
      options_(options),
      momentum_(params_.size()) {
  if (options_status_.ok()) options_status_ = CheckSgdOptions(options);
}

absl::StatusOr<std::unique_ptr<SGD>> SGD::Create(std::vector<Tensor> params,
                                                 SgdOptions options) {
  return Create(OneGroup(std::move(params)), options);
}

absl::StatusOr<std::unique_ptr<SGD>> SGD::Create(std::vector<ParamGroup> groups,
                                                 SgdOptions options) {
  MIXRT_RETURN_IF_ERROR(CheckSgdOptions(options));
  MIXRT_RETURN_IF_ERROR(CheckGroups(groups));
  return std::make_unique<SGD>(std::move(groups), options);
}

absl::Status SGD::step(const kernels::StepScaling& scaling) {
  MIXRT_RETURN_IF_ERROR(BeginStep());
  bool creates_state = false;
  for (size_t i = 0; i < params_.size(); ++i) {
    creates_state |= options_.momentum != 0 && params_[i].grad().defined() &&
                     !momentum_[i].defined();
  }
  MIXRT_ASSIGN_OR_RETURN(bool skipped,
                         SkippedBeforeStateExists(scaling, creates_state));
  if (skipped) return absl::OkStatus();
  // One launch per parameter group and first_step (a momentum buffer made
  // now starts as the gradient), as torch's fused SGD steps a group.
  std::vector<bool> fresh(params_.size());
  for (size_t i = 0; i < params_.size(); ++i)
    fresh[i] = !momentum_[i].defined();
  for (const Group& group : groups_) {
    for (bool first_step : {true, false}) {
      std::vector<Tensor> params, grads, buffers;
      for (size_t i = group.begin; i < group.end; ++i) {
        const Tensor& p = params_[i];
        if (!p.grad().defined() || fresh[i] != first_step) continue;
        if (options_.momentum != 0 && first_step) {
          MIXRT_ASSIGN_OR_RETURN(momentum_[i],
                                 zeros(p.shape(), DType::kF32, p.device()));
        }
        params.push_back(p.detach());
        MIXRT_ASSIGN_OR_RETURN(Tensor grad,
                               StepGradient(p.grad(), options_.maximize));
        grads.push_back(grad);
        if (options_.momentum != 0) buffers.push_back(momentum_[i]);
      }
      if (params.empty()) continue;
      MixrtSgdAttrs a{};
      a.lr = group.lr;
      a.momentum = options_.momentum;
      a.dampening = options_.dampening;
      a.weight_decay = group.weight_decay;
      a.nesterov = options_.nesterov;
      a.first_step = first_step;
      MIXRT_RETURN_IF_ERROR(
          kernels::multi_tensor_sgd_step_(params, grads, buffers, a, scaling));
    }
  }
  return absl::OkStatus();
}

std::vector<std::pair<std::string, Tensor>> SGD::state_dict() const {
  std::vector<std::pair<std::string, Tensor>> state;
  for (size_t i = 0; i < momentum_.size(); ++i) {
    if (momentum_[i].defined()) {
      state.emplace_back(absl::StrCat(i, ".momentum_buffer"), momentum_[i]);
    }
  }
  return state;
}

AdamW::AdamW(std::vector<Tensor> params, AdamWOptions options)
    : AdamW(OneGroup(std::move(params)), options) {}

AdamW::AdamW(std::vector<ParamGroup> groups, AdamWOptions options)
    : Optimizer(std::move(groups), options.lr, options.weight_decay),
      options_(options),
      exp_avg_(params_.size()),
      exp_avg_sq_(params_.size()),
      max_exp_avg_sq_(params_.size()),
      step_(params_.size()) {
  if (options_status_.ok()) options_status_ = CheckAdamWOptions(options);
}

absl::StatusOr<std::unique_ptr<AdamW>> AdamW::Create(std::vector<Tensor> params,
                                                     AdamWOptions options) {
  return Create(OneGroup(std::move(params)), options);
}

absl::StatusOr<std::unique_ptr<AdamW>> AdamW::Create(
    std::vector<ParamGroup> groups, AdamWOptions options) {
  MIXRT_RETURN_IF_ERROR(CheckAdamWOptions(options));
  MIXRT_RETURN_IF_ERROR(CheckGroups(groups));
  return std::make_unique<AdamW>(std::move(groups), options);
}

absl::Status AdamW::step(const kernels::StepScaling& scaling) {
  MIXRT_RETURN_IF_ERROR(BeginStep());
  bool creates_state = false;
  for (size_t i = 0; i < params_.size(); ++i) {
    creates_state |= params_[i].grad().defined() && !step_[i].defined();
  }
  MIXRT_ASSIGN_OR_RETURN(bool skipped,
                         SkippedBeforeStateExists(scaling, creates_state));
  if (skipped) return absl::OkStatus();
  for (size_t i = 0; i < params_.size(); ++i) {
    const Tensor& p = params_[i];
    if (!p.grad().defined()) continue;
    if (!step_[i].defined()) {
      MIXRT_ASSIGN_OR_RETURN(exp_avg_[i],
                             zeros(p.shape(), DType::kF32, p.device()));
      MIXRT_ASSIGN_OR_RETURN(exp_avg_sq_[i],
                             zeros(p.shape(), DType::kF32, p.device()));
      MIXRT_ASSIGN_OR_RETURN(step_[i], zeros({1}, DType::kF32, p.device()));
      if (options_.amsgrad) {
        MIXRT_ASSIGN_OR_RETURN(max_exp_avg_sq_[i],
                               zeros(p.shape(), DType::kF32, p.device()));
      }
    }
    const Group& group = GroupOf(i);
    MixrtAdamWAttrs a{};
    a.lr = group.lr;
    a.beta1 = options_.beta1;
    a.beta2 = options_.beta2;
    a.eps = options_.eps;
    a.weight_decay = group.weight_decay;
    MIXRT_ASSIGN_OR_RETURN(Tensor grad,
                           StepGradient(p.grad(), options_.maximize));
    MIXRT_RETURN_IF_ERROR(kernels::adamw_step_(p.detach(), grad, exp_avg_[i],
                                               exp_avg_sq_[i], step_[i], a,
                                               scaling, max_exp_avg_sq_[i]));
  }
  return absl::OkStatus();
}

std::vector<std::pair<std::string, Tensor>> AdamW::state_dict() const {
  std::vector<std::pair<std::string, Tensor>> state;
  for (size_t i = 0; i < step_.size(); ++i) {
    if (!step_[i].defined()) continue;
    state.emplace_back(absl::StrCat(i, ".exp_avg"), exp_avg_[i]);
    state.emplace_back(absl::StrCat(i, ".exp_avg_sq"), exp_avg_sq_[i]);
    state.emplace_back(absl::StrCat(i, ".step"), step_[i]);
    if (options_.amsgrad) {
      state.emplace_back(absl::StrCat(i, ".max_exp_avg_sq"),
                         max_exp_avg_sq_[i]);
    }
  }
  return state;
}

namespace {

// Whether state[name] is present, after checking it is f32 of `shape`.
absl::StatusOr<bool> CheckStateTensor(
    const std::map<std::string, Tensor>& state, const std::string& name,
    const Shape& shape) {
  auto it = state.find(name);
  if (it == state.end()) return false;
  if (it->second.shape() != shape || it->second.dtype() != DType::kF32) {
    return absl::InvalidArgumentError(absl::StrCat(
        "optimizer state '", name, "' is ", DTypeName(it->second.dtype()), " ",
        ShapeToString(it->second.shape()), "; expected f32 ",
        ShapeToString(shape)));
  }
  return true;
}

// A private copy of state[name], or undefined when absent.
absl::StatusOr<Tensor> StateCopy(const std::map<std::string, Tensor>& state,
                                 const std::string& name) {
  auto it = state.find(name);
  if (it == state.end()) return Tensor();
  return it->second.clone();
}

}  // namespace

absl::Status SGD::check_state_dict(
    const std::map<std::string, Tensor>& state) const {
  for (size_t i = 0; i < params_.size(); ++i) {
    MIXRT_RETURN_IF_ERROR(CheckStateTensor(state,
                                           absl::StrCat(i, ".momentum_buffer"),
                                           params_[i].shape())
                              .status());
  }
  return absl::OkStatus();
}

absl::Status SGD::load_state_dict(const std::map<std::string, Tensor>& state) {
  MIXRT_RETURN_IF_ERROR(check_state_dict(state));
  std::vector<Tensor> momentum(params_.size());
  for (size_t i = 0; i < params_.size(); ++i) {
    MIXRT_ASSIGN_OR_RETURN(
        momentum[i], StateCopy(state, absl::StrCat(i, ".momentum_buffer")));
  }
  momentum_ = std::move(momentum);
  return absl::OkStatus();
}

absl::Status AdamW::check_state_dict(
    const std::map<std::string, Tensor>& state) const {
  for (size_t i = 0; i < params_.size(); ++i) {
    MIXRT_ASSIGN_OR_RETURN(const bool m,
                           CheckStateTensor(state, absl::StrCat(i, ".exp_avg"),
                                            params_[i].shape()));
    MIXRT_ASSIGN_OR_RETURN(
        const bool v, CheckStateTensor(state, absl::StrCat(i, ".exp_avg_sq"),
                                       params_[i].shape()));
    MIXRT_ASSIGN_OR_RETURN(
        const bool s, CheckStateTensor(state, absl::StrCat(i, ".step"), {1}));
    if (m != v || m != s) {
      return absl::InvalidArgumentError(
          absl::StrCat("optimizer state for parameter ", i, " is incomplete"));
    }
    // AMSGrad's maximum is there exactly when this optimizer keeps one: a
    // plain AdamW would drop it, an AMSGrad one would restart it from 0.
    MIXRT_ASSIGN_OR_RETURN(
        const bool x,
        CheckStateTensor(state, absl::StrCat(i, ".max_exp_avg_sq"),
                         params_[i].shape()));
    if (m && x != options_.amsgrad) {
      return absl::InvalidArgumentError(absl::StrCat(
          "optimizer state for parameter ", i,
          x ? " has max_exp_avg_sq (saved with amsgrad); this AdamW has "
              "amsgrad=false"
            : " has no max_exp_avg_sq (saved without amsgrad); this AdamW "
              "has amsgrad=true"));
    }
  }
  return absl::OkStatus();
}

absl::Status AdamW::load_state_dict(
    const std::map<std::string, Tensor>& state) {
  MIXRT_RETURN_IF_ERROR(check_state_dict(state));
  std::vector<Tensor> m(params_.size()), v(params_.size()), s(params_.size()),
      x(params_.size());
  for (size_t i = 0; i < params_.size(); ++i) {
    MIXRT_ASSIGN_OR_RETURN(m[i], StateCopy(state, absl::StrCat(i, ".exp_avg")));
    MIXRT_ASSIGN_OR_RETURN(v[i],
                           StateCopy(state, absl::StrCat(i, ".exp_avg_sq")));
    MIXRT_ASSIGN_OR_RETURN(s[i], StateCopy(state, absl::StrCat(i, ".step")));
    MIXRT_ASSIGN_OR_RETURN(
        x[i], StateCopy(state, absl::StrCat(i, ".max_exp_avg_sq")));
  }
  exp_avg_ = std::move(m);
  exp_avg_sq_ = std::move(v);
  step_ = std::move(s);
  max_exp_avg_sq_ = std::move(x);
  return absl::OkStatus();
}

namespace {

// The gradients' total norm of order p as an f32 [1] on their device:
// torch.linalg.vector_norm over all their elements at once (PyTorch takes
// the norm of the per-tensor norms: the same value up to rounding).
absl::StatusOr<Tensor> TotalNorm(const std::vector<Tensor>& grads,
                                 const Device& device, double p) {
  if (p == 2) return kernels::multi_tensor_norm(grads, device);
  const bool largest = std::isinf(p);
  Tensor total;
  for (const Tensor& g : grads) {
    MIXRT_ASSIGN_OR_RETURN(Tensor wide, g.to(DType::kF32));
    Tensor part;
    if (largest) {
      MIXRT_ASSIGN_OR_RETURN(part, kernels::abs_max(wide));
    } else {
      MIXRT_ASSIGN_OR_RETURN(Tensor magnitude, kernels::abs(wide));
      MIXRT_ASSIGN_OR_RETURN(Tensor powered, kernels::pow(magnitude, p));
      MIXRT_ASSIGN_OR_RETURN(part, kernels::sum(powered));
    }
    MIXRT_ASSIGN_OR_RETURN(part, part.reshape({1}));
    if (!total.defined()) {
      total = part;
    } else if (largest) {
      MIXRT_ASSIGN_OR_RETURN(total, kernels::maximum(total, part));
    } else {
      MIXRT_ASSIGN_OR_RETURN(total, kernels::add(total, part));
    }
  }
  return largest ? total : kernels::pow(total, 1.0 / p);
}

}  // namespace

absl::StatusOr<double> clip_grad_norm_(const std::vector<Tensor>& params,
                                       double max_norm, double norm_type,
                                       bool error_if_nonfinite) {
  if (!(norm_type > 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("clip_grad_norm_: norm_type is ", norm_type,
                     "; expected a positive order or infinity"));
  }
  std::vector<Tensor> grads;
  for (const Tensor& p : params) {
    if (p.grad().defined()) grads.push_back(p.grad());
  }
  if (grads.empty()) return 0.0;
  const Device device = grads[0].device();
  // As torch.nn.utils.clip_grad_norm_: the total norm (the L2 norm in one
  // multi-tensor launch), the clip coefficient min(max_norm / (norm +
  // 1e-6), 1) on the device, every gradient multiplied by it in place in
  // one more launch. Reading the norm back is the only synchronization,
  // except that error_if_nonfinite reads it before scaling.
  MIXRT_ASSIGN_OR_RETURN(Tensor norm, TotalNorm(grads, device, norm_type));
  // Read before scaling when a non-finite norm must stop it, once either
  // way (the norm tensor does not change after).
  std::optional<double> read;
  if (error_if_nonfinite) {
    MIXRT_ASSIGN_OR_RETURN(read, norm.item());
    const double value = *read;
    if (!std::isfinite(value)) {
      // FailedPrecondition: the gradients' state, not the arguments, is
      // wrong (Python: RuntimeError, as PyTorch raises).
      return absl::FailedPreconditionError(absl::StrCat(
          "clip_grad_norm_: the total norm of order ", norm_type,
          " of the gradients is ", value,
          ", so it cannot be clipped; to scale the gradients by it anyway, "
          "pass error_if_nonfinite=false"));
    }
  }
  MIXRT_ASSIGN_OR_RETURN(Tensor denom, kernels::scale(norm, 1.0, 1e-6));
  MIXRT_ASSIGN_OR_RETURN(Tensor limit,
                         full({1}, max_norm, DType::kF32, device));
  MIXRT_ASSIGN_OR_RETURN(Tensor coef, kernels::div(limit, denom));
  MIXRT_ASSIGN_OR_RETURN(Tensor one, ones({1}, DType::kF32, device));
  MIXRT_ASSIGN_OR_RETURN(coef, kernels::minimum(coef, one));
  // The grad scaler's multi-tensor kernel is an in-place "multiply every
  // tensor by a device scalar"; its inf flag is not needed here (a
  // non-finite norm is returned, and the scaler found it already).
  MIXRT_ASSIGN_OR_RETURN(Tensor unused_flag, zeros({1}, DType::kF32, device));
  MIXRT_RETURN_IF_ERROR(
      kernels::non_finite_check_and_unscale_(grads, unused_flag, coef));
  if (read.has_value()) return *read;
  return norm.item();
}

absl::Status clip_grad_value_(const std::vector<Tensor>& params,
                              double clip_value) {
  for (const Tensor& p : params) {
    const Tensor g = p.grad();
    if (!g.defined()) continue;
    MIXRT_ASSIGN_OR_RETURN(Tensor c,
                           kernels::clamp(g, -clip_value, clip_value));
    // In place: the parameter keeps the same gradient tensor.
    MIXRT_RETURN_IF_ERROR(kernels::copy_(g, c));
  }
  return absl::OkStatus();
}

}  // namespace mixrt
