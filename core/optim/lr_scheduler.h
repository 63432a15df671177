// Learning-rate schedules (torch.optim.lr_scheduler), stepped once per
// epoch (or step) by the caller. As PyTorch's: each step computes the next
// lr from the optimizer's current one (the chainable form), so schedules
// stacked on one optimizer compose (a LinearLR warm-up under a StepLR
// decay) instead of the last one overwriting the others; creation makes
// PyTorch's initial step (epoch -1 -> 0: LinearLR starts scaling there).
// Create refuses parameters that would produce a NaN or divide by zero.
// Every schedule's base lr is the optimizer's initial lr (PyTorch's
// param_group["initial_lr"]: the lr before the first schedule on it).
#ifndef MIXRT_CORE_OPTIM_LR_SCHEDULER_H_
#define MIXRT_CORE_OPTIM_LR_SCHEDULER_H_

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/optim/optimizer.h"

namespace mixrt {

class LRScheduler {
 public:
  virtual ~LRScheduler() = default;
  // Advances one epoch and sets the optimizer's lr.
  absl::Status step();
  // Jumps to `epoch` and sets the lr from the closed form where the
  // schedule has one (PyTorch's deprecated step(epoch), which SequentialLR
  // uses at a milestone: step(0) restarts the schedule from the base lr).
  absl::Status StepTo(int epoch);
  // The lr the last step set, of the first param group (PyTorch's
  // get_last_lr()[0]); every group's.
  double get_last_lr() const { return last_lrs_[0]; }
  const std::vector<double>& get_last_lrs() const { return last_lrs_; }
  int last_epoch() const { return last_epoch_; }
  // PyTorch's state_dict without the optimizer: last_epoch, base_lr and
  // last_lr (of the first param group; "base_lr.1", "last_lr.1", ... of
  // the others). load_state_dict checks every key before changing
  // anything.
  std::map<std::string, double> state_dict() const;
  absl::Status load_state_dict(const std::map<std::string, double>& state);

 protected:
  explicit LRScheduler(Optimizer* optimizer);
  // The constructor's step of PyTorch (last_epoch -1 -> 0).
  absl::Status InitialStep();
  // The next lr from `current`, the optimizer's lr now (whatever other
  // schedules on it set), at last_epoch_: PyTorch's chainable get_lr().
  virtual double NextLr(double current) const = 0;
  // The lr at last_epoch_ from the base alone, where PyTorch has a
  // _get_closed_form_lr; none: StepTo uses NextLr.
  virtual std::optional<double> ClosedFormLr() const { return std::nullopt; }
  // The lr step() sets for a group whose lr is `current` (and whatever
  // else the schedule changes first, as OneCycleLR's momentum); by default
  // NextLr(current).
  virtual absl::StatusOr<double> ComputeLr(double current);

  friend class SequentialLR;

 private:
  absl::Status Advance(int epoch, bool closed_form);

 protected:
  Optimizer* optimizer_;
  int last_epoch_ = -1;
  // The base of the group NextLr / ClosedFormLr are computing (they run
  // once per param group); every group's; what the last step set.
  double base_lr_ = 0;
  std::vector<double> base_lrs_;
  std::vector<double> last_lrs_;
};

// lr * gamma every step_size epochs.
class StepLR : public LRScheduler {
 public:
  static absl::StatusOr<StepLR> Create(Optimizer* optimizer, int step_size,
                                       double gamma = 0.1);

 private:
  StepLR(Optimizer* optimizer, int step_size, double gamma);
  double NextLr(double current) const override;
  std::optional<double> ClosedFormLr() const override;

  int step_size_;
  double gamma_;
};

// Half a cosine from the base lr to eta_min over t_max epochs, and back
// over the next t_max (PyTorch's recursive form).
class CosineAnnealingLR : public LRScheduler {
 public:
  static absl::StatusOr<CosineAnnealingLR> Create(Optimizer* optimizer,
                                                  int t_max,
                                                  double eta_min = 0);

 private:
  CosineAnnealingLR(Optimizer* optimizer, int t_max, double eta_min);
  double NextLr(double current) const override;
  std::optional<double> ClosedFormLr() const override;

  int t_max_;
  double eta_min_;
};

// The lr scaled by a factor going linearly from start_factor (0 < s <= 1,
// applied at creation) to end_factor (0 <= e <= 1) over total_iters epochs.
class LinearLR : public LRScheduler {
 public:
  static absl::StatusOr<LinearLR> Create(Optimizer* optimizer,
                                         double start_factor = 1.0 / 3,
                                         double end_factor = 1.0,
                                         int total_iters = 5);

 private:
  LinearLR(Optimizer* optimizer, double start_factor, double end_factor,
           int total_iters);
  double NextLr(double current) const override;
  std::optional<double> ClosedFormLr() const override;

  double start_factor_, end_factor_;
  int total_iters_;
};

// base_lr * lr_lambda(epoch): not chainable (it sets the lr outright), as
// PyTorch's.
class LambdaLR : public LRScheduler {
 public:
  static absl::StatusOr<LambdaLR> Create(Optimizer* optimizer,
                                         std::function<double(int)> lr_lambda);

 private:
  LambdaLR(Optimizer* optimizer, std::function<double(int)> lr_lambda);
  double NextLr(double current) const override;

  std::function<double(int)> lr_lambda_;
};

struct OneCycleLROptions {
  double max_lr = 0;  // Required: the peak.
  // The cycle's length: total_steps, or epochs * steps_per_epoch.
  int total_steps = 0;
  int epochs = 0;
  int steps_per_epoch = 0;
  double pct_start = 0.3;               // Share of the cycle spent rising.
  std::string anneal_strategy = "cos";  // or "linear".
  // Cycles the optimizer's momentum (SGD) or beta1 (AdamW) inversely.
  bool cycle_momentum = true;
  double base_momentum = 0.85;
  double max_momentum = 0.95;
  double div_factor = 25;         // initial lr = max_lr / div_factor.
  double final_div_factor = 1e4;  // min lr = initial lr / final_div_factor.
  bool three_phase = false;       // Back down to the initial lr first.
};

// torch.optim.lr_scheduler.OneCycleLR (Smith's 1cycle policy): up from
// max_lr / div_factor to max_lr, then down to the minimum, in closed form
// per step; with cycle_momentum the momentum moves the other way. Stepping
// past total_steps is an error, as in PyTorch.
class OneCycleLR : public LRScheduler {
 public:
  static absl::StatusOr<OneCycleLR> Create(Optimizer* optimizer,
                                           OneCycleLROptions options);

 private:
  struct Phase {
    double end_step;
    double start_lr, end_lr, start_momentum, end_momentum;
  };
  OneCycleLR(Optimizer* optimizer, OneCycleLROptions options, int total_steps);
  double NextLr(double current) const override;
  absl::StatusOr<double> ComputeLr(double current) override;
  double Anneal(double start, double end, double pct) const;
  // The phase holding last_epoch_ and how far into it, in [0, 1].
  std::pair<const Phase*, double> Where() const;

  OneCycleLROptions options_;
  int total_steps_;
  std::vector<Phase> phases_;
};

// torch.optim.lr_scheduler.SequentialLR: schedules[0] until milestones[0],
// then schedules[1] restarted from its base (step(0)), and so on. The
// schedules must be on `optimizer` and outlive this; creating it undoes
// their creation steps (the lr goes back to the initial lr) and redoes the
// first one's, as PyTorch does.
class SequentialLR {
 public:
  static absl::StatusOr<SequentialLR> Create(
      Optimizer* optimizer, std::vector<LRScheduler*> schedules,
      std::vector<int> milestones);
  absl::Status step();
  double get_last_lr() const { return last_lr_; }
  int last_epoch() const { return last_epoch_; }
  // last_epoch and last_lr; each schedule's own state is its state_dict
  // (PyTorch's nests them under "_schedulers"). load_state_dict checks
  // both before changing anything.
  std::map<std::string, double> state_dict() const;
  absl::Status load_state_dict(const std::map<std::string, double>& state);

 private:
  SequentialLR(Optimizer* optimizer, std::vector<LRScheduler*> schedules,
               std::vector<int> milestones);

  Optimizer* optimizer_;
  std::vector<LRScheduler*> schedules_;
  std::vector<int> milestones_;
  int last_epoch_ = 0;
  double last_lr_ = 0;
};

struct ReduceLROnPlateauOptions {
  std::string mode = "min";  // "min": lower metrics are better; or "max".
  double factor = 0.1;       // new lr = max(lr * factor, min_lr); < 1.
  int patience = 10;         // Bad epochs tolerated before a reduction.
  double threshold = 1e-4;   // What counts as better than the best so far.
  std::string threshold_mode = "rel";  // or "abs".
  int cooldown = 0;   // Epochs after a reduction with bad epochs ignored.
  double min_lr = 0;  // The floor.
  double eps = 1e-8;  // Reductions smaller than this are skipped.
};

// torch.optim.lr_scheduler.ReduceLROnPlateau: step(metric) after each
// evaluation reduces the lr when the metric stops improving.
class ReduceLROnPlateau {
 public:
  static absl::StatusOr<ReduceLROnPlateau> Create(
      Optimizer* optimizer, ReduceLROnPlateauOptions options = {});
  // A NaN metric is a bad epoch (it is never better), as in PyTorch.
  absl::Status step(double metric);
  double get_last_lr() const { return optimizer_->lr(); }
  int num_bad_epochs() const { return num_bad_epochs_; }
  // last_epoch, best, num_bad_epochs and cooldown_counter.
  std::map<std::string, double> state_dict() const;
  absl::Status load_state_dict(const std::map<std::string, double>& state);

 private:
  ReduceLROnPlateau(Optimizer* optimizer, ReduceLROnPlateauOptions options);
  bool IsBetter(double metric) const;

  Optimizer* optimizer_;
  ReduceLROnPlateauOptions options_;
  int last_epoch_ = 0;
  double best_;
  int num_bad_epochs_ = 0;
  int cooldown_counter_ = 0;
};

}  // namespace mixrt

#endif  // MIXRT_CORE_OPTIM_LR_SCHEDULER_H_
