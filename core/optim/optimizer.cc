#include "core/optim/optimizer.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "core/kernels/amp_kernels.h"
#include "core/kernels/fill_copy.h"
#include "core/kernels/pointwise.h"
#include "core/kernels/reduce.h"
#include "core/tensor/factories.h"
#include "mixrt/status_macros.h"

namespace mixrt {

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

absl::StatusOr<bool> Optimizer::SkippedBeforeStateExists(
    const kernels::StepScaling& scaling, bool creates_state) {
  if (!creates_state || !scaling.found_inf.defined()) return false;
  MIXRT_ASSIGN_OR_RETURN(double found_inf, scaling.found_inf.item());
  return found_inf != 0;
}

SGD::SGD(std::vector<Tensor> params, SgdOptions options)
    : Optimizer(std::move(params), options.lr),
      options_(options),
      momentum_(params_.size()) {}

absl::Status SGD::step(const kernels::StepScaling& scaling) {
  // Validate everything first: a bad parameter leaves all state unchanged.
  for (const Tensor& p : params_) MIXRT_RETURN_IF_ERROR(CheckParam(p));
  bool creates_state = false;
  for (size_t i = 0; i < params_.size(); ++i) {
    creates_state |= options_.momentum != 0 && params_[i].grad().defined() &&
                     !momentum_[i].defined();
  }
  MIXRT_ASSIGN_OR_RETURN(bool skipped,
                         SkippedBeforeStateExists(scaling, creates_state));
  if (skipped) return absl::OkStatus();
  for (size_t i = 0; i < params_.size(); ++i) {
    const Tensor& p = params_[i];
    if (!p.grad().defined()) continue;
    MixrtSgdAttrs a{};
    a.lr = lr_;
    a.momentum = options_.momentum;
    a.dampening = options_.dampening;
    a.weight_decay = options_.weight_decay;
    a.nesterov = options_.nesterov;
    a.first_step = !momentum_[i].defined();
    if (options_.momentum != 0 && !momentum_[i].defined()) {
      MIXRT_ASSIGN_OR_RETURN(momentum_[i],
                             zeros(p.shape(), DType::kF32, p.device()));
    }
    MIXRT_RETURN_IF_ERROR(
        kernels::sgd_step_(p.detach(), p.grad(), momentum_[i], a, scaling));
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
    : Optimizer(std::move(params), options.lr),
      options_(options),
      exp_avg_(params_.size()),
      exp_avg_sq_(params_.size()),
      step_(params_.size()) {}

absl::Status AdamW::step(const kernels::StepScaling& scaling) {
  for (const Tensor& p : params_) MIXRT_RETURN_IF_ERROR(CheckParam(p));
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
    }
    MixrtAdamWAttrs a{};
    a.lr = lr_;
    a.beta1 = options_.beta1;
    a.beta2 = options_.beta2;
    a.eps = options_.eps;
    a.weight_decay = options_.weight_decay;
    MIXRT_RETURN_IF_ERROR(kernels::adamw_step_(p.detach(), p.grad(),
                                               exp_avg_[i], exp_avg_sq_[i],
                                               step_[i], a, scaling));
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
  }
  return state;
}

namespace {

// state[name] checked against `like`'s shape; undefined when absent.
absl::StatusOr<Tensor> StateTensor(const std::map<std::string, Tensor>& state,
                                   const std::string& name,
                                   const Shape& shape) {
  auto it = state.find(name);
  if (it == state.end()) return Tensor();
  if (it->second.shape() != shape || it->second.dtype() != DType::kF32) {
    return absl::InvalidArgumentError(absl::StrCat(
        "optimizer state '", name, "' is ", DTypeName(it->second.dtype()), " ",
        ShapeToString(it->second.shape()), "; expected f32 ",
        ShapeToString(shape)));
  }
  return it->second.clone();
}

}  // namespace

absl::Status SGD::load_state_dict(const std::map<std::string, Tensor>& state) {
  std::vector<Tensor> momentum(params_.size());
  for (size_t i = 0; i < params_.size(); ++i) {
    MIXRT_ASSIGN_OR_RETURN(
        momentum[i], StateTensor(state, absl::StrCat(i, ".momentum_buffer"),
                                 params_[i].shape()));
  }
  momentum_ = std::move(momentum);
  return absl::OkStatus();
}

absl::Status AdamW::load_state_dict(
    const std::map<std::string, Tensor>& state) {
  std::vector<Tensor> m(params_.size()), v(params_.size()), s(params_.size());
  for (size_t i = 0; i < params_.size(); ++i) {
    MIXRT_ASSIGN_OR_RETURN(m[i], StateTensor(state, absl::StrCat(i, ".exp_avg"),
                                             params_[i].shape()));
    MIXRT_ASSIGN_OR_RETURN(
        v[i],
        StateTensor(state, absl::StrCat(i, ".exp_avg_sq"), params_[i].shape()));
    MIXRT_ASSIGN_OR_RETURN(s[i],
                           StateTensor(state, absl::StrCat(i, ".step"), {1}));
    if (m[i].defined() != v[i].defined() || m[i].defined() != s[i].defined()) {
      return absl::InvalidArgumentError(
          absl::StrCat("optimizer state for parameter ", i, " is incomplete"));
    }
  }
  exp_avg_ = std::move(m);
  exp_avg_sq_ = std::move(v);
  step_ = std::move(s);
  return absl::OkStatus();
}

absl::StatusOr<double> clip_grad_norm_(const std::vector<Tensor>& params,
                                       double max_norm) {
  std::vector<Tensor> grads;
  for (const Tensor& p : params) {
    if (p.grad().defined()) grads.push_back(p.grad());
  }
  if (grads.empty()) return 0.0;
  const Device device = grads[0].device();
  // As torch.nn.utils.clip_grad_norm_: the total norm in one multi-tensor
  // launch, the clip coefficient min(max_norm / (norm + 1e-6), 1) on the
  // device, every gradient multiplied by it in place in one more launch.
  // Reading the norm back is the only synchronization.
  MIXRT_ASSIGN_OR_RETURN(Tensor norm,
                         kernels::multi_tensor_norm(grads, device));
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

StepLR::StepLR(Optimizer* optimizer, int step_size, double gamma)
    : optimizer_(optimizer),
      step_size_(step_size),
      gamma_(gamma),
      base_lr_(optimizer->lr()) {}

void StepLR::step() {
  ++epoch_;
  optimizer_->set_lr(base_lr_ * std::pow(gamma_, epoch_ / step_size_));
}

CosineAnnealingLR::CosineAnnealingLR(Optimizer* optimizer, int t_max,
                                     double eta_min)
    : optimizer_(optimizer),
      t_max_(t_max),
      eta_min_(eta_min),
      base_lr_(optimizer->lr()) {}

void CosineAnnealingLR::step() {
  ++epoch_;
  const double pi = 3.14159265358979323846;
  optimizer_->set_lr(eta_min_ + (base_lr_ - eta_min_) *
                                    (1 + std::cos(pi * epoch_ / t_max_)) / 2);
}

}  // namespace mixrt
