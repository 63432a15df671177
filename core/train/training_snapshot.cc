#include "core/train/training_snapshot.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "core/tensor/factories.h"
#include "core/tensor/generator.h"
#include "mixrt/status_macros.h"

namespace mixrt {
namespace {

absl::StatusOr<std::vector<std::pair<std::string, HostTensor>>> CopyAll(
    const std::vector<std::pair<std::string, Tensor>>& named) {
  std::vector<std::pair<std::string, HostTensor>> out;
  out.reserve(named.size());
  for (const auto& [name, t] : named) {
    if (!t.defined()) continue;
    MIXRT_ASSIGN_OR_RETURN(HostTensor h, HostTensor::Of(t));
    out.emplace_back(name, std::move(h));
  }
  return out;
}

// The snapshot's copies of `named` on `device`, matched by name and checked
// against the live tensors' dtypes and shapes.
absl::StatusOr<std::vector<Tensor>> Upload(
    const std::vector<std::pair<std::string, HostTensor>>& saved,
    const std::vector<std::pair<std::string, Tensor>>& live,
    const Device& device, absl::string_view what) {
  if (saved.size() != live.size()) {
    return absl::FailedPreconditionError(
        absl::StrCat("the snapshot holds ", saved.size(), " ", what, "; the ",
                     "model now has ", live.size()));
  }
  std::vector<Tensor> out;
  out.reserve(saved.size());
  for (size_t i = 0; i < saved.size(); ++i) {
    if (saved[i].first != live[i].first) {
      return absl::FailedPreconditionError(
          absl::StrCat("the snapshot's ", what, " ", i, " is '", saved[i].first,
                       "'; the model's is '", live[i].first, "'"));
    }
    MIXRT_ASSIGN_OR_RETURN(Tensor t, saved[i].second.On(device));
    out.push_back(std::move(t));
  }
  return out;
}

}  // namespace

absl::StatusOr<HostTensor> HostTensor::Of(const Tensor& t) {
  HostTensor h;
  h.dtype = t.dtype();
  h.shape.assign(t.shape().begin(), t.shape().end());
  MIXRT_ASSIGN_OR_RETURN(h.bytes, t.to_bytes());
  return h;
}

absl::StatusOr<Tensor> HostTensor::On(const Device& device) const {
  return from_bytes(bytes, shape, dtype, device);
}

absl::StatusOr<TrainingSnapshot> TrainingSnapshot::Take(
    const nn::Module& model, const Optimizer& optimizer,
    const GradScaler* scaler, int64_t step) {
  TrainingSnapshot s;
  MIXRT_ASSIGN_OR_RETURN(s.parameters_, CopyAll(model.named_parameters()));
  MIXRT_ASSIGN_OR_RETURN(s.buffers_, CopyAll(model.named_buffers()));
  MIXRT_ASSIGN_OR_RETURN(s.optimizer_state_, CopyAll(optimizer.state_dict()));
  for (size_t g = 0; g < optimizer.num_param_groups(); ++g) {
    s.group_lrs_.push_back(optimizer.group_lr(g));
  }
  if (scaler != nullptr && scaler->is_enabled()) {
    MIXRT_ASSIGN_OR_RETURN(s.scaler_state_, scaler->state_dict());
  }
  s.rng_seed_ = DefaultGenerator().seed();
  s.rng_offset_ = DefaultGenerator().offset();
  s.step_ = step;
  return s;
}

absl::Status TrainingSnapshot::Restore(nn::Module& model, Optimizer& optimizer,
                                       const Device& device) const {
  const std::vector<std::pair<std::string, Tensor>> params =
      model.named_parameters();
  const std::vector<std::pair<std::string, Tensor>> buffers =
      model.named_buffers();
  MIXRT_ASSIGN_OR_RETURN(std::vector<Tensor> new_params,
                         Upload(parameters_, params, device, "parameters"));
  MIXRT_ASSIGN_OR_RETURN(std::vector<Tensor> new_buffers,
                         Upload(buffers_, buffers, device, "buffers"));
  std::map<std::string, Tensor> state;
  for (const auto& [name, h] : optimizer_state_) {
    MIXRT_ASSIGN_OR_RETURN(state[name], h.On(device));
  }
  MIXRT_RETURN_IF_ERROR(optimizer.check_state_dict(state));
  if (group_lrs_.size() != optimizer.num_param_groups()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the snapshot holds ", group_lrs_.size(),
        " parameter groups; the optimizer has ", optimizer.num_param_groups()));
  }
  // Everything is on `device` and checked: replace.
  for (size_t i = 0; i < params.size(); ++i) {
    MIXRT_RETURN_IF_ERROR(Tensor(params[i].second).set_data(new_params[i]));
  }
  for (size_t i = 0; i < buffers.size(); ++i) {
    MIXRT_RETURN_IF_ERROR(Tensor(buffers[i].second).set_data(new_buffers[i]));
  }
  MIXRT_RETURN_IF_ERROR(optimizer.load_state_dict(state));
  for (size_t g = 0; g < group_lrs_.size(); ++g) {
    MIXRT_RETURN_IF_ERROR(optimizer.set_group_lr(g, group_lrs_[g]));
  }
  DefaultGenerator().set_state(rng_seed_, rng_offset_);
  return absl::OkStatus();
}

}  // namespace mixrt
