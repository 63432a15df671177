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

LRScheduler::LRScheduler(Optimizer* optimizer) : optimizer_(optimizer) {
  for (size_t g = 0; g < optimizer->num_param_groups(); ++g) {
    base_lrs_.push_back(optimizer->initial_lr(g));
    last_lrs_.push_back(optimizer->group_lr(g));
  }
  base_lr_ = base_lrs_[0];  // An optimizer has at least one group.
}

absl::Status LRScheduler::InitialStep() { return step(); }

absl::StatusOr<double> LRScheduler::ComputeLr(double current) {
  return NextLr(current);
}

absl::Status LRScheduler::step() { return Advance(last_epoch_ + 1, false); }

absl::Status LRScheduler::StepTo(int epoch) { return Advance(epoch, true); }

absl::Status LRScheduler::Advance(int epoch, bool closed_form) {
  const int before = last_epoch_;
  last_epoch_ = epoch;
  // Every group's next lr from its own lr and base, all checked before
  // any is set: a refused lr leaves the schedule and the optimizer as they
  // were.
  std::vector<double> next(base_lrs_.size());
  absl::Status s;
  for (size_t g = 0; g < next.size() && s.ok(); ++g) {
    base_lr_ = base_lrs_[g];
    const double current = optimizer_->group_lr(g);
    std::optional<double> closed = closed_form ? ClosedFormLr() : std::nullopt;
    absl::StatusOr<double> lr = closed.has_value()
                                    ? absl::StatusOr<double>(*closed)
                                    : ComputeLr(current);
    s = lr.ok() ? CheckLearningRate(*lr) : lr.status();
    if (s.ok()) next[g] = *lr;
  }
  base_lr_ = base_lrs_[0];
  if (!s.ok()) {
    last_epoch_ = before;
    return s;
  }
  for (size_t g = 0; g < next.size(); ++g) {
    MIXRT_RETURN_IF_ERROR(optimizer_->set_group_lr(g, next[g]));
  }
  last_lrs_ = std::move(next);
  return absl::OkStatus();
}

namespace {

// A state dict's count (last_epoch, num_bad_epochs, ...): an integer >=
// `least` that fits an int.
absl::Status CheckCount(const std::map<std::string, double>& state,
                        const char* key, const char* what, int least = 0) {
  const double v = state.at(key);
  if (!(v >= least) || v != std::floor(v) ||
      v > std::numeric_limits<int>::max()) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ".load_state_dict: ", key, " is ", v,
                     "; expected an integer >= ", least));
  }
  return absl::OkStatus();
}

// "base_lr" / "last_lr" for the first group, "base_lr.1" ... for the rest.
std::string GroupKey(const char* name, size_t group) {
  return group == 0 ? name : absl::StrCat(name, ".", group);
}

}  // namespace

std::map<std::string, double> LRScheduler::state_dict() const {
  std::map<std::string, double> state = {{"last_epoch", last_epoch_}};
  for (size_t g = 0; g < base_lrs_.size(); ++g) {
    state[GroupKey("base_lr", g)] = base_lrs_[g];
    state[GroupKey("last_lr", g)] = last_lrs_[g];
  }
  return state;
}

absl::Status LRScheduler::load_state_dict(
    const std::map<std::string, double>& state) {
  MIXRT_RETURN_IF_ERROR(
      CheckKeys(state, {"last_epoch", "base_lr", "last_lr"}, "LRScheduler"));
  std::vector<double> base(base_lrs_.size()), last(base_lrs_.size());
  for (size_t g = 0; g < base.size(); ++g) {
    for (auto [name, values] :
         {std::pair<const char*, std::vector<double>*>{"base_lr", &base},
          {"last_lr", &last}}) {
      auto it = state.find(GroupKey(name, g));
      if (it == state.end()) {
        return absl::InvalidArgumentError(absl::StrCat(
            "LRScheduler.load_state_dict: no '", GroupKey(name, g),
            "' (the optimizer has ", base.size(), " param groups)"));
      }
      MIXRT_RETURN_IF_ERROR(CheckLearningRate(it->second));
      (*values)[g] = it->second;
    }
  }
  // -1: a schedule SequentialLR has not started yet (as PyTorch's).
  MIXRT_RETURN_IF_ERROR(CheckCount(state, "last_epoch", "LRScheduler", -1));
  last_epoch_ = static_cast<int>(state.at("last_epoch"));
  base_lrs_ = std::move(base);
  last_lrs_ = std::move(last);
  base_lr_ = base_lrs_[0];
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

std::optional<double> StepLR::ClosedFormLr() const {
  return base_lr_ * std::pow(gamma_, last_epoch_ / step_size_);
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

std::optional<double> CosineAnnealingLR::ClosedFormLr() const {
  return eta_min_ +
         (base_lr_ - eta_min_) * (1 + std::cos(kPi * last_epoch_ / t_max_)) / 2;
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

std::optional<double> LinearLR::ClosedFormLr() const {
  return base_lr_ * (start_factor_ + (end_factor_ - start_factor_) *
                                         std::min(total_iters_, last_epoch_) /
                                         total_iters_);
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

absl::StatusOr<OneCycleLR> OneCycleLR::Create(Optimizer* optimizer,
                                              OneCycleLROptions o) {
  MIXRT_RETURN_IF_ERROR(CheckOptimizer(optimizer, "OneCycleLR"));
  int total = o.total_steps;
  if (total == 0) {
    if (o.epochs <= 0 || o.steps_per_epoch <= 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "OneCycleLR: give total_steps > 0, or epochs and steps_per_epoch > "
          "0; got total_steps ",
          o.total_steps, ", epochs ", o.epochs, ", steps_per_epoch ",
          o.steps_per_epoch));
    }
    if (o.epochs > std::numeric_limits<int>::max() / o.steps_per_epoch) {
      return absl::InvalidArgumentError(
          "OneCycleLR: epochs * steps_per_epoch overflows");
    }
    total = o.epochs * o.steps_per_epoch;
  } else if (total < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "OneCycleLR: total_steps is ", total, "; expected a positive integer"));
  }
  if (!(o.pct_start >= 0 && o.pct_start <= 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("OneCycleLR: pct_start is ", o.pct_start,
                     "; expected a value between 0 and 1"));
  }
  if (o.anneal_strategy != "cos" && o.anneal_strategy != "linear") {
    return absl::InvalidArgumentError(
        absl::StrCat("OneCycleLR: anneal_strategy is '", o.anneal_strategy,
                     "'; expected 'cos' or 'linear'"));
  }
  MIXRT_RETURN_IF_ERROR(CheckLearningRate(o.max_lr));
  if (!(o.div_factor > 0) || !std::isfinite(o.div_factor) ||
      !(o.final_div_factor > 0) || !std::isfinite(o.final_div_factor)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "OneCycleLR: div_factor ", o.div_factor, " and final_div_factor ",
        o.final_div_factor, " must be finite and > 0"));
  }
  // A phase of zero steps would divide by zero (PyTorch returns NaN there).
  const double rise = o.pct_start * total;
  if (rise - 1 <= 0 || (o.three_phase && 2 * rise - 2 <= rise - 1) ||
      total - 1 <= (o.three_phase ? 2 * rise - 2 : rise - 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("OneCycleLR: pct_start ", o.pct_start, " of ", total,
                     " steps leaves a phase without steps"));
  }
  if (o.cycle_momentum) {
    const absl::StatusOr<double> m = optimizer->momentum();
    if (!m.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "OneCycleLR: cycle_momentum needs an optimizer with momentum or "
          "betas: ",
          m.status().message()));
    }
    // Both ends must be momenta the optimizer takes (a refusal leaves its
    // own); it starts at max_momentum, as PyTorch sets it at creation.
    for (double end : {o.base_momentum, o.max_momentum}) {
      if (absl::Status s = optimizer->set_momentum(end); !s.ok()) {
        (void)optimizer->set_momentum(*m);
        return s;
      }
    }
  }
  optimizer->set_initial_lr(o.max_lr / o.div_factor);
  OneCycleLR s(optimizer, o, total);
  MIXRT_RETURN_IF_ERROR(s.InitialStep());
  return s;
}

OneCycleLR::OneCycleLR(Optimizer* optimizer, OneCycleLROptions options,
                       int total_steps)
    : LRScheduler(optimizer),
      options_(std::move(options)),
      total_steps_(total_steps) {
  const double initial = options_.max_lr / options_.div_factor;
  const double min_lr = initial / options_.final_div_factor;
  const double max_m = options_.max_momentum, base_m = options_.base_momentum;
  // PyTorch's _schedule_phases, end steps computed as it does.
  const double rise_end = options_.pct_start * total_steps_ - 1;
  if (options_.three_phase) {
    phases_ = {{rise_end, initial, options_.max_lr, max_m, base_m},
               {2 * options_.pct_start * total_steps_ - 2, options_.max_lr,
                initial, base_m, max_m},
               {total_steps_ - 1.0, initial, min_lr, max_m, max_m}};
  } else {
    phases_ = {{rise_end, initial, options_.max_lr, max_m, base_m},
               {total_steps_ - 1.0, options_.max_lr, min_lr, base_m, max_m}};
  }
}

double OneCycleLR::Anneal(double start, double end, double pct) const {
  if (options_.anneal_strategy == "cos") {
    const double cos_out = std::cos(kPi * pct) + 1;
    return end + (start - end) / 2.0 * cos_out;
  }
  return (end - start) * pct + start;
}

std::pair<const OneCycleLR::Phase*, double> OneCycleLR::Where() const {
  double start_step = 0;
  for (size_t i = 0; i < phases_.size(); ++i) {
    const Phase& p = phases_[i];
    if (last_epoch_ <= p.end_step || i + 1 == phases_.size()) {
      return {&p, (last_epoch_ - start_step) / (p.end_step - start_step)};
    }
    start_step = p.end_step;
  }
  return {&phases_.back(), 1.0};  // Not reached: the last phase matches.
}

double OneCycleLR::NextLr(double) const {
  const auto [phase, pct] = Where();
  return Anneal(phase->start_lr, phase->end_lr, pct);
}

absl::StatusOr<double> OneCycleLR::ComputeLr(double current) {
  if (last_epoch_ > total_steps_) {
    return absl::OutOfRangeError(absl::StrCat(
        "OneCycleLR: tried to step ", last_epoch_,
        " times; the specified number of total steps is ", total_steps_));
  }
  if (options_.cycle_momentum) {
    const auto [phase, pct] = Where();
    MIXRT_RETURN_IF_ERROR(optimizer_->set_momentum(
        Anneal(phase->start_momentum, phase->end_momentum, pct)));
  }
  return NextLr(current);
}

absl::StatusOr<SequentialLR> SequentialLR::Create(
    Optimizer* optimizer, std::vector<LRScheduler*> schedules,
    std::vector<int> milestones) {
  MIXRT_RETURN_IF_ERROR(CheckOptimizer(optimizer, "SequentialLR"));
  if (schedules.empty()) {
    return absl::InvalidArgumentError("SequentialLR: no schedules");
  }
  if (milestones.size() + 1 != schedules.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "SequentialLR: ", schedules.size(), " schedules need ",
        schedules.size() - 1, " milestones, got ", milestones.size()));
  }
  for (size_t i = 0; i < schedules.size(); ++i) {
    if (schedules[i] == nullptr || schedules[i]->optimizer_ != optimizer) {
      return absl::InvalidArgumentError(
          absl::StrCat("SequentialLR: schedule ", i,
                       " is not on the optimizer SequentialLR was given"));
    }
  }
  for (size_t i = 0; i < milestones.size(); ++i) {
    if (milestones[i] < 1 || (i > 0 && milestones[i] <= milestones[i - 1])) {
      return absl::InvalidArgumentError(
          "SequentialLR: milestones must be increasing integers >= 1");
    }
  }
  for (size_t g = 0; g < optimizer->num_param_groups(); ++g) {
    MIXRT_RETURN_IF_ERROR(optimizer->set_group_lr(g, optimizer->initial_lr(g)));
  }
  for (LRScheduler* s : schedules) --s->last_epoch_;
  MIXRT_RETURN_IF_ERROR(schedules[0]->InitialStep());
  SequentialLR seq(optimizer, std::move(schedules), std::move(milestones));
  seq.last_lr_ = seq.schedules_[0]->get_last_lr();
  return seq;
}

SequentialLR::SequentialLR(Optimizer* optimizer,
                           std::vector<LRScheduler*> schedules,
                           std::vector<int> milestones)
    : optimizer_(optimizer),
      schedules_(std::move(schedules)),
      milestones_(std::move(milestones)) {}

absl::Status SequentialLR::step() {
  const int epoch = last_epoch_ + 1;
  const size_t index =
      std::upper_bound(milestones_.begin(), milestones_.end(), epoch) -
      milestones_.begin();
  LRScheduler* s = schedules_[index];
  const bool restart = index > 0 && milestones_[index - 1] == epoch;
  MIXRT_RETURN_IF_ERROR(restart ? s->StepTo(0) : s->step());
  last_epoch_ = epoch;
  last_lr_ = s->get_last_lr();
  return absl::OkStatus();
}

std::map<std::string, double> SequentialLR::state_dict() const {
  return {{"last_epoch", last_epoch_}, {"last_lr", last_lr_}};
}

absl::Status SequentialLR::load_state_dict(
    const std::map<std::string, double>& state) {
  MIXRT_RETURN_IF_ERROR(
      CheckKeys(state, {"last_epoch", "last_lr"}, "SequentialLR"));
  MIXRT_RETURN_IF_ERROR(CheckCount(state, "last_epoch", "SequentialLR"));
  MIXRT_RETURN_IF_ERROR(CheckLearningRate(state.at("last_lr")));
  last_epoch_ = static_cast<int>(state.at("last_epoch"));
  last_lr_ = state.at("last_lr");
  return absl::OkStatus();
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
    // Each group's own lr, as PyTorch's _reduce_lr.
    for (size_t g = 0; g < optimizer_->num_param_groups(); ++g) {
      const double old_lr = optimizer_->group_lr(g);
      const double new_lr = std::max(old_lr * options_.factor, options_.min_lr);
      if (old_lr - new_lr > options_.eps) {
        MIXRT_RETURN_IF_ERROR(optimizer_->set_group_lr(g, new_lr));
      }
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
    MIXRT_RETURN_IF_ERROR(CheckCount(state, key, "ReduceLROnPlateau"));
  }
  last_epoch_ = static_cast<int>(state.at("last_epoch"));
  best_ = state.at("best");
  num_bad_epochs_ = static_cast<int>(state.at("num_bad_epochs"));
  cooldown_counter_ = static_cast<int>(state.at("cooldown_counter"));
  return absl::OkStatus();
}

}  // namespace mixrt
