#include "core/optim/lr_scheduler.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "mixrt/status_macros.h"

namespace mixrt {
namespace {

constexpr double kPi = 3.14159265358979323846;  // Python's math.pi.

// Python's a % b for b > 0: never negative.
int PositiveModulo(int a, int b) { return ((a % b) + b) % b; }

absl::Status CheckOptimizer(const Optimizer* optimizer, const char* name) {
  if (optimizer == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(name, ": no optimizer"));
  }
  return absl::OkStatus();
}

// Every key a state dict must hold, checked before anything changes.
absl::Status CheckKeys(const std::map<std::string, double>& state,
                       std::initializer_list<const char*> keys,
                       const char* what) {
  for (const char* key : keys) {
    auto it = state.find(key);
    if (it == state.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, ".load_state_dict: no '", key, "'"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

LRScheduler::LRScheduler(Optimizer* optimizer)
    : optimizer_(optimizer),
      base_lr_(optimizer->lr()),
      last_lr_(optimizer->lr()) {}

absl::Status LRScheduler::InitialStep() { return step(); }

absl::Status LRScheduler::step() {
  ++last_epoch_;
  const double next = NextLr(optimizer_->lr());
  if (absl::Status s = optimizer_->set_lr(next); !s.ok()) {
    --last_epoch_;  // A refused lr leaves the schedule where it was.
    return s;
  }
  last_lr_ = next;
  return absl::OkStatus();
}

std::map<std::string, double> LRScheduler::state_dict() const {
  return {{"last_epoch", last_epoch_},
          {"base_lr", base_lr_},
          {"last_lr", last_lr_}};
}

absl::Status LRScheduler::load_state_dict(
    const std::map<std::string, double>& state) {
  MIXRT_RETURN_IF_ERROR(
      CheckKeys(state, {"last_epoch", "base_lr", "last_lr"}, "LRScheduler"));
  const double epoch = state.at("last_epoch");
  if (!(epoch >= 0) || epoch != std::floor(epoch) ||
      epoch > std::numeric_limits<int>::max()) {
    return absl::InvalidArgumentError(
        absl::StrCat("LRScheduler.load_state_dict: last_epoch is ", epoch,
                     "; expected an integer >= 0"));
  }
  MIXRT_RETURN_IF_ERROR(CheckLearningRate(state.at("base_lr")));
  MIXRT_RETURN_IF_ERROR(CheckLearningRate(state.at("last_lr")));
  last_epoch_ = static_cast<int>(epoch);
  base_lr_ = state.at("base_lr");
  last_lr_ = state.at("last_lr");
  return absl::OkStatus();
}

absl::StatusOr<StepLR> StepLR::Create(Optimizer* optimizer, int step_size,
                                      double gamma) {
  MIXRT_RETURN_IF_ERROR(CheckOptimizer(optimizer, "StepLR"));
  if (step_size < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "StepLR: step_size is ", step_size, "; expected an integer >= 1"));
  }
  if (!(gamma >= 0) || !std::isfinite(gamma)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "StepLR: gamma is ", gamma, "; expected a finite value >= 0"));
  }
  StepLR s(optimizer, step_size, gamma);
  MIXRT_RETURN_IF_ERROR(s.InitialStep());
  return s;
}

StepLR::StepLR(Optimizer* optimizer, int step_size, double gamma)
    : LRScheduler(optimizer), step_size_(step_size), gamma_(gamma) {}

double StepLR::NextLr(double current) const {
  if (last_epoch_ == 0 || last_epoch_ % step_size_ != 0) return current;
  return current * gamma_;
}

absl::StatusOr<CosineAnnealingLR> CosineAnnealingLR::Create(
    Optimizer* optimizer, int t_max, double eta_min) {
  MIXRT_RETURN_IF_ERROR(CheckOptimizer(optimizer, "CosineAnnealingLR"));
  if (t_max < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "CosineAnnealingLR: T_max is ", t_max, "; expected an integer >= 1"));
  }
  MIXRT_RETURN_IF_ERROR(CheckLearningRate(eta_min));
  CosineAnnealingLR s(optimizer, t_max, eta_min);
  MIXRT_RETURN_IF_ERROR(s.InitialStep());
  return s;
}

CosineAnnealingLR::CosineAnnealingLR(Optimizer* optimizer, int t_max,
                                     double eta_min)
    : LRScheduler(optimizer), t_max_(t_max), eta_min_(eta_min) {}

double CosineAnnealingLR::NextLr(double current) const {
  // PyTorch's get_lr, term for term (the same roundings).
  if (last_epoch_ == 0) return current;
  if (PositiveModulo(last_epoch_ - 1 - t_max_, 2 * t_max_) == 0) {
    return current + (base_lr_ - eta_min_) * (1 - std::cos(kPi / t_max_)) / 2;
  }
  return (1 + std::cos(kPi * last_epoch_ / t_max_)) /
             (1 + std::cos(kPi * (last_epoch_ - 1) / t_max_)) *
             (current - eta_min_) +
         eta_min_;
}

absl::StatusOr<LinearLR> LinearLR::Create(Optimizer* optimizer,
                                          double start_factor,
                                          double end_factor, int total_iters) {
  MIXRT_RETURN_IF_ERROR(CheckOptimizer(optimizer, "LinearLR"));
  if (!(start_factor > 0 && start_factor <= 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("LinearLR: start_factor is ", start_factor,
                     "; expected a value greater than 0 and at most 1"));
  }
  if (!(end_factor >= 0 && end_factor <= 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("LinearLR: end_factor is ", end_factor,
                     "; expected a value between 0 and 1"));
  }
  if (total_iters < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("LinearLR: total_iters is ", total_iters,
                     "; expected an integer >= 1"));
  }
  LinearLR s(optimizer, start_factor, end_factor, total_iters);
  MIXRT_RETURN_IF_ERROR(s.InitialStep());
  return s;
}

LinearLR::LinearLR(Optimizer* optimizer, double start_factor, double end_factor,
                   int total_iters)
    : LRScheduler(optimizer),
      start_factor_(start_factor),
      end_factor_(end_factor),
      total_iters_(total_iters) {}

double LinearLR::NextLr(double current) const {
  if (last_epoch_ == 0) return current * start_factor_;
  if (last_epoch_ > total_iters_) return current;
  return current *
         (1.0 + (end_factor_ - start_factor_) /
                    (total_iters_ * start_factor_ +
                     (last_epoch_ - 1) * (end_factor_ - start_factor_)));
}

absl::StatusOr<LambdaLR> LambdaLR::Create(
    Optimizer* optimizer, std::function<double(int)> lr_lambda) {
  MIXRT_RETURN_IF_ERROR(CheckOptimizer(optimizer, "LambdaLR"));
  if (!lr_lambda) return absl::InvalidArgumentError("LambdaLR: no lr_lambda");
  LambdaLR s(optimizer, std::move(lr_lambda));
  MIXRT_RETURN_IF_ERROR(s.InitialStep());
  return s;
}

LambdaLR::LambdaLR(Optimizer* optimizer, std::function<double(int)> lr_lambda)
    : LRScheduler(optimizer), lr_lambda_(std::move(lr_lambda)) {}

double LambdaLR::NextLr(double) const {
  // A NaN or negative factor is refused by the optimizer's set_lr.
  return base_lr_ * lr_lambda_(last_epoch_);
}

absl::StatusOr<ReduceLROnPlateau> ReduceLROnPlateau::Create(
    Optimizer* optimizer, ReduceLROnPlateauOptions options) {
  MIXRT_RETURN_IF_ERROR(CheckOptimizer(optimizer, "ReduceLROnPlateau"));
  if (options.mode != "min" && options.mode != "max") {
    return absl::InvalidArgumentError(absl::StrCat(
        "ReduceLROnPlateau: mode '", options.mode, "'; expected min or max"));
  }
  if (options.threshold_mode != "rel" && options.threshold_mode != "abs") {
    return absl::InvalidArgumentError(
        absl::StrCat("ReduceLROnPlateau: threshold_mode '",
                     options.threshold_mode, "'; expected rel or abs"));
  }
  if (!(options.factor < 1.0) || !(options.factor >= 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("ReduceLROnPlateau: factor is ", options.factor,
                     "; expected 0 <= factor < 1"));
  }
  if (options.patience < 0 || options.cooldown < 0) {
    return absl::InvalidArgumentError(
        "ReduceLROnPlateau: patience and cooldown must be >= 0");
  }
  MIXRT_RETURN_IF_ERROR(CheckLearningRate(options.min_lr));
  return ReduceLROnPlateau(optimizer, std::move(options));
}

ReduceLROnPlateau::ReduceLROnPlateau(Optimizer* optimizer,
                                     ReduceLROnPlateauOptions options)
    : optimizer_(optimizer),
      options_(std::move(options)),
      best_(options_.mode == "min" ? std::numeric_limits<double>::infinity()
                                   : -std::numeric_limits<double>::infinity()) {
}

bool ReduceLROnPlateau::IsBetter(double a) const {
  const bool rel = options_.threshold_mode == "rel";
  if (options_.mode == "min") {
    return rel ? a < best_ * (1.0 - options_.threshold)
               : a < best_ - options_.threshold;
  }
  return rel ? a > best_ * (options_.threshold + 1.0)
             : a > best_ + options_.threshold;
}

absl::Status ReduceLROnPlateau::step(double metric) {
  ++last_epoch_;
  if (IsBetter(metric)) {
    best_ = metric;
    num_bad_epochs_ = 0;
  } else {
    ++num_bad_epochs_;
  }
  if (cooldown_counter_ > 0) {
    --cooldown_counter_;
    num_bad_epochs_ = 0;  // Bad epochs in cooldown do not count.
  }
  if (num_bad_epochs_ > options_.patience) {
    const double old_lr = optimizer_->lr();
    const double new_lr = std::max(old_lr * options_.factor, options_.min_lr);
    if (old_lr - new_lr > options_.eps) {
      MIXRT_RETURN_IF_ERROR(optimizer_->set_lr(new_lr));
    }
    cooldown_counter_ = options_.cooldown;
    num_bad_epochs_ = 0;
  }
  return absl::OkStatus();
}

std::map<std::string, double> ReduceLROnPlateau::state_dict() const {
  return {{"last_epoch", last_epoch_},
          {"best", best_},
          {"num_bad_epochs", num_bad_epochs_},
          {"cooldown_counter", cooldown_counter_}};
}

absl::Status ReduceLROnPlateau::load_state_dict(
    const std::map<std::string, double>& state) {
  MIXRT_RETURN_IF_ERROR(CheckKeys(
      state, {"last_epoch", "best", "num_bad_epochs", "cooldown_counter"},
      "ReduceLROnPlateau"));
  for (const char* key : {"last_epoch", "num_bad_epochs", "cooldown_counter"}) {
    const double v = state.at(key);
    if (!(v >= 0) || v != std::floor(v) ||
        v > std::numeric_limits<int>::max()) {
      return absl::InvalidArgumentError(
          absl::StrCat("ReduceLROnPlateau.load_state_dict: ", key, " is ", v,
                       "; expected an integer >= 0"));
    }
  }
  last_epoch_ = static_cast<int>(state.at("last_epoch"));
  best_ = state.at("best");
  num_bad_epochs_ = static_cast<int>(state.at("num_bad_epochs"));
  cooldown_counter_ = static_cast<int>(state.at("cooldown_counter"));
  return absl::OkStatus();
}

}  // namespace mixrt
