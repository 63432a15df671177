// Optimizers over f32 master parameters, stepping with the backend's fused
// kernels. Like PyTorch's fused optimizers they take the grad scaler's
// device-side grad_scale and found_inf, so a skipped step costs no host
// synchronization.
//
//   mixrt::SGD sgd(model.parameters(), {.lr = 0.1, .momentum = 0.9});
//   MIXRT_RETURN_IF_ERROR(loss.backward());
//   MIXRT_RETURN_IF_ERROR(sgd.step());
//   sgd.zero_grad();
#ifndef MIXRT_CORE_OPTIM_OPTIMIZER_H_
#define MIXRT_CORE_OPTIM_OPTIMIZER_H_

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/kernels/optimizer_kernels.h"
#include "core/tensor/tensor.h"

namespace mixrt {

// PyTorch's param_groups: parameters that share a learning rate and weight
// decay, each defaulting to the optimizer's options when unset.
//
//   mixrt::AdamW opt({{decay, {}}, {no_decay, {}, /*weight_decay=*/0.0}},
//                    {.lr = 3e-4, .weight_decay = 0.1});
struct ParamGroup {
  std::vector<Tensor> params;
  std::optional<double> lr;
  std::optional<double> weight_decay;
};

class Optimizer {
 public:
  // One group of every parameter.
  Optimizer(std::vector<Tensor> params, double lr, double weight_decay = 0);
  // `groups` in order; unset values from (lr, weight_decay). A parameter
  // in two groups is refused (options_status_), as PyTorch refuses it.
  Optimizer(std::vector<ParamGroup> groups, double lr, double weight_decay);
  virtual ~Optimizer() = default;

  // One update of every parameter that has a gradient. `scaling` carries
  // the scaler's grad_scale (divided out) and found_inf (skips the step).
  virtual absl::Status step(const kernels::StepScaling& scaling = {}) = 0;
  // Sets every gradient to none (PyTorch's zero_grad(set_to_none=True)).
  void zero_grad();

  // Every parameter, group after group.
  const std::vector<Tensor>& params() const { return params_; }
  // The first group's lr (the lr, with one group).
  double lr() const { return groups_.empty() ? default_lr_ : groups_[0].lr; }
  // Sets every group's lr; refuses a negative or non-finite one (the
  // optimizer keeps its own).
  absl::Status set_lr(double lr);
  size_t num_param_groups() const { return groups_.size(); }
  double group_lr(size_t group) const { return groups_.at(group).lr; }
  absl::Status set_group_lr(size_t group, double lr);
  double group_weight_decay(size_t group) const {
    return groups_.at(group).weight_decay;
  }
  // The parameters of one group.
  std::vector<Tensor> group_params(size_t group) const;
  // PyTorch's param_group["initial_lr"]: a group's lr when the first
  // schedule was put on this optimizer (that call records every group's),
  // the base every schedule's closed forms start from. OneCycleLR sets its
  // own.
  double initial_lr(size_t group = 0);
  void set_initial_lr(double lr) {
    for (Group& g : groups_) g.initial_lr = lr;
  }
  // The momentum a schedule may cycle (OneCycleLR): SGD's momentum, AdamW's
  // beta1; UNIMPLEMENTED for an optimizer without one. set_momentum checks
  // the value as the constructor's checks would.
  virtual absl::StatusOr<double> momentum() const;
  virtual absl::Status set_momentum(double momentum);
  // Optimizer state tensors by name, for checkpoints, and their restoration
  // (validated against the parameters before anything changes).
  virtual std::vector<std::pair<std::string, Tensor>> state_dict() const = 0;
  virtual absl::Status load_state_dict(
      const std::map<std::string, Tensor>& state) = 0;
  // What load_state_dict checks, without changing anything.
  virtual absl::Status check_state_dict(
      const std::map<std::string, Tensor>& state) const = 0;

 protected:
  absl::Status CheckParam(const Tensor& p) const;
  // What every step() does first: reports the step to a compile trace as
  // something it cannot replay, and refuses invalid options and
  // parameters before any state changes.
  absl::Status BeginStep() const;
  // True when the scaler's found_inf says this step is skipped, read only
  // when `creates_state`: a skipped step must leave no trace, and state
  // created for it (a first momentum buffer, AdamW's moments) would make
  // the next real step run as a second one. PyTorch never calls step() then.
  // State is created on a parameter's first steps only, so steady-state
  // steps never synchronize.
  static absl::StatusOr<bool> SkippedBeforeStateExists(
      const kernels::StepScaling& scaling, bool creates_state);

  struct Group {
    size_t begin = 0, end = 0;  // Its parameters: params_[begin, end).
    double lr = 0;
    double weight_decay = 0;
    std::optional<double> initial_lr;
  };
  // The group of params_[i].
  const Group& GroupOf(size_t i) const;

  std::vector<Tensor> params_;
  std::vector<Group> groups_;
  double default_lr_ = 0;
  // Invalid options are refused by Create; a directly constructed optimizer
  // with them fails every step() with this error instead.
  absl::Status options_status_;
};

// PyTorch's constructor checks (lr, momentum, betas, eps, weight_decay),
// with NaN and inf refused too: a non-finite hyperparameter would be saved
// in a checkpoint that cannot be loaded.
absl::Status CheckLearningRate(double lr);

struct SgdOptions {
  double lr = 0.01;
  double momentum = 0;
  double dampening = 0;
  double weight_decay = 0;
  bool nesterov = false;
  // Ascends the objective: each step takes -grad (torch's maximize=True).
  bool maximize = false;
};

absl::Status CheckSgdOptions(const SgdOptions& options);

class SGD : public Optimizer {
 public:
  static absl::StatusOr<std::unique_ptr<SGD>> Create(std::vector<Tensor> params,
                                                     SgdOptions options);
  static absl::StatusOr<std::unique_ptr<SGD>> Create(
      std::vector<ParamGroup> groups, SgdOptions options);
  SGD(std::vector<Tensor> params, SgdOptions options);
  // Each group's lr and weight_decay override `options`'.
  SGD(std::vector<ParamGroup> groups, SgdOptions options);
  absl::Status step(const kernels::StepScaling& scaling = {}) override;
  std::vector<std::pair<std::string, Tensor>> state_dict() const override;
  absl::Status load_state_dict(
      const std::map<std::string, Tensor>& state) override;
  absl::Status check_state_dict(
      const std::map<std::string, Tensor>& state) const override;
  absl::StatusOr<double> momentum() const override { return options_.momentum; }
  absl::Status set_momentum(double momentum) override;

 private:
  SgdOptions options_;
  std::vector<Tensor> momentum_;  // Undefined until a parameter's first step.
};

struct AdamWOptions {
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 1e-2;
  // Ascends the objective: each step takes -grad (torch's maximize=True).
  bool maximize = false;
  // AMSGrad (torch's amsgrad=True): the denominator takes the running
  // maximum of exp_avg_sq, one more f32 state tensor per parameter
  // ("<i>.max_exp_avg_sq"). Needs a plugin of ABI 1.2.
  bool amsgrad = false;
};

absl::Status CheckAdamWOptions(const AdamWOptions& options);

class AdamW : public Optimizer {
 public:
  static absl::StatusOr<std::unique_ptr<AdamW>> Create(
      std::vector<Tensor> params, AdamWOptions options);
  static absl::StatusOr<std::unique_ptr<AdamW>> Create(
      std::vector<ParamGroup> groups, AdamWOptions options);
  AdamW(std::vector<Tensor> params, AdamWOptions options);
  // Each group's lr and weight_decay override `options`'.
  AdamW(std::vector<ParamGroup> groups, AdamWOptions options);
  absl::Status step(const kernels::StepScaling& scaling = {}) override;
  std::vector<std::pair<std::string, Tensor>> state_dict() const override;
  absl::Status load_state_dict(
      const std::map<std::string, Tensor>& state) override;
  absl::Status check_state_dict(
      const std::map<std::string, Tensor>& state) const override;
  // beta1, as PyTorch's schedules cycle param_group["betas"][0].
  absl::StatusOr<double> momentum() const override { return options_.beta1; }
  absl::Status set_momentum(double beta1) override;

 private:
  AdamWOptions options_;
  // max_exp_avg_sq_ stays undefined without amsgrad.
  std::vector<Tensor> exp_avg_, exp_avg_sq_, max_exp_avg_sq_, step_;
};

// Scales gradients so their global norm of order norm_type (> 0, or
// infinity: the largest magnitude) is at most max_norm; returns the norm
// before clipping, as torch.nn.utils.clip_grad_norm_. A non-finite norm is
// returned and the gradients scaled by its coefficient, 0 or NaN, as
// PyTorch does (under a GradScaler that step is skipped anyway); with
// error_if_nonfinite it is an error instead and no gradient changes. The
// L2 norm is one multi-tensor launch; every order then one in-place scale
// launch and one host read, whatever the number of parameters.
absl::StatusOr<double> clip_grad_norm_(const std::vector<Tensor>& params,
                                       double max_norm, double norm_type = 2.0,
                                       bool error_if_nonfinite = false);
// Clamps every gradient element to [-clip_value, clip_value].
absl::Status clip_grad_value_(const std::vector<Tensor>& params,
                              double clip_value);

}  // namespace mixrt

#endif  // MIXRT_CORE_OPTIM_OPTIMIZER_H_
