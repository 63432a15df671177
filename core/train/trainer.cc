#include "core/train/trainer.h"

#include <cstdio>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/autograd/grad_mode.h"
#include "core/distributed/distributed_checkpoint.h"
#include "core/functional/ops.h"
#include "core/io/checkpoint.h"
#include "core/kernels/reduce.h"
#include "core/plugin/registry.h"
#include "core/tensor/factories.h"
#include "core/tensor/op_fallback.h"
#include "mixrt/status_macros.h"

namespace mixrt {

Trainer::Trainer(std::shared_ptr<nn::Module> model,
                 std::unique_ptr<Optimizer> optimizer, Criterion criterion,
                 Device device, TrainerOptions options)
    : model_(std::move(model)),
      optimizer_(std::move(optimizer)),
      criterion_(std::move(criterion)),
      device_(device),
      options_(options) {
  const DType dtype =
      options.amp_dtype.value_or(DefaultAutocastDType(device.type()));
  if (!options.use_amp) {
    amp_reason_ = "off: use_amp is false";
  } else if (AmpGloballyDisabled()) {
    amp_reason_ = "off: AMP is globally disabled (MIXRT_DISABLE_AMP)";
  } else if (options.auto_precision) {
    const PrecisionChoice c = AutoPrecision(device, MIXRT_OP_CLASS_MATMUL);
    amp_ = c.dtype != DType::kF32;
    amp_reason_ = absl::StrCat(amp_ ? "on, auto: " : "off, auto: ", c.reason);
  } else {
    const CapabilityEntry& cap =
        device.info().capability(MIXRT_OP_CLASS_MATMUL, dtype);
    const std::string what =
        absl::StrCat(DTypeName(dtype), " matmul on ", device.ToString());
    if (cap.level == MIXRT_SUPPORT_UNSUPPORTED) {
      amp_reason_ =
          absl::StrCat("off: ", what, " is unsupported (", cap.reason, ")");
    } else if (cap.level == MIXRT_SUPPORT_SLOW && !options.force_amp) {
      amp_reason_ = absl::StrCat("off: ", what, " would be slower than f32 (",
                                 cap.reason, ")");
    } else {
      amp_ = true;
      amp_reason_ = absl::StrCat(
          "on: ", what,
          cap.level == MIXRT_SUPPORT_SLOW ? " (forced; slow: " : " (",
          cap.reason.empty() ? "native" : cap.reason, ")");
    }
  }
  const bool scaler_on =
      amp_ && options.use_scaler.value_or(!options.auto_precision &&
                                          dtype == DType::kF16);
  scaler_options_ = GradScalerOptions{.enabled = scaler_on};
  scaler_ = std::make_unique<GradScaler>(device, scaler_options_);
}

absl::Status Trainer::EnsureDistributed() {
  if (options_.process_group == nullptr || ddp_ != nullptr) {
    return absl::OkStatus();
  }
  MIXRT_ASSIGN_OR_RETURN(ddp_, distributed::DistributedDataParallel::Create(
                                   model_, options_.process_group));
  return absl::OkStatus();
}

absl::StatusOr<Tensor> Trainer::Forward(const Tensor& input) {
  MIXRT_RETURN_IF_ERROR(EnsureDistributed());
  if (options_.compile.has_value() && !compiled_.has_value()) {
    MIXRT_ASSIGN_OR_RETURN(compiled_,
                           mixrt::compile(model_, *options_.compile));
  }
  // Compiled, the model's forward runs as a graph and DDP only reduces its
  // gradients (its hooks sit on the parameters), so rank 0's buffers are
  // broadcast here, as DDP's forward does (the graph reads the buffers in
  // place; the broadcast counts as a write for its kept launches).
  if (compiled_.has_value()) {
    if (ddp_ != nullptr) {
      MIXRT_RETURN_IF_ERROR(ddp_->CheckSameFirstInput(input));
      MIXRT_RETURN_IF_ERROR(ddp_->SyncBuffers());
    }
    return (*compiled_)(input);
  }
  return ddp_ != nullptr ? ddp_->forward(input) : model_->forward(input);
}

std::string Trainer::CompileExplain() const {
  return compiled_.has_value() ? compiled_->compiled().Explain() : "";
}

AutocastOptions Trainer::Autocast() const {
  return AutocastOptions{options_.amp_dtype, options_.auto_precision, amp_,
                         true};
}

absl::StatusOr<Tensor> Trainer::train_step(const Tensor& input,
                                           const Tensor& target) {
  if (options_.snapshot_every <= 0) return StepOnce(input, target);
  if (options_.process_group != nullptr) {
    return absl::FailedPreconditionError(
        "TrainerOptions::snapshot_every does not work with a process group "
        "(every rank would have to fail over together)");
  }
  MIXRT_RETURN_IF_ERROR(MaybeSnapshot());
  RecordedBatch record;
  MIXRT_ASSIGN_OR_RETURN(record.input, HostTensor::Of(input));
  MIXRT_ASSIGN_OR_RETURN(record.target, HostTensor::Of(target));
  for (size_t g = 0; g < optimizer_->num_param_groups(); ++g) {
    record.group_lrs.push_back(optimizer_->group_lr(g));
  }
  since_snapshot_.push_back(std::move(record));
  // After a failover, a batch made on a device the run left moves along.
  MIXRT_ASSIGN_OR_RETURN(const Tensor here_input, input.to(device_));
  MIXRT_ASSIGN_OR_RETURN(const Tensor here_target, target.to(device_));
  absl::StatusOr<Tensor> loss = StepOnce(here_input, here_target);
  if (!loss.ok() && absl::IsUnavailable(loss.status()) &&
      !device_.backend()->failure().empty()) {
    return FailOver(loss.status());
  }
  return loss;
}

absl::Status Trainer::MaybeSnapshot() {
  const bool due =
      !snapshot_.has_value() || (micro_ == 0 && step_ > snapshot_->step() &&
                                 step_ % options_.snapshot_every == 0);
  if (!due) return absl::OkStatus();
  MIXRT_ASSIGN_OR_RETURN(
      snapshot_,
      TrainingSnapshot::Take(*model_, *optimizer_, scaler_.get(), step_));
  since_snapshot_.clear();
  return absl::OkStatus();
}

absl::StatusOr<Device> Trainer::FailoverDevice() const {
  Registry& registry = Registry::Global();
  std::string name = options_.failover_backend;
  if (name.empty()) {
    const std::string policy = FallbackPolicy();
    if (policy != "auto" && policy != "off" && policy != "none") name = policy;
  }
  if (!name.empty()) {
    MIXRT_ASSIGN_OR_RETURN(const Backend* backend, registry.FindBackend(name));
    return Device(backend, 0);
  }
  for (const Backend* backend : registry.UsableBackends()) {
    if (backend != device_.backend()) return Device(backend, 0);
  }
  return absl::UnavailableError("no other usable backend to continue on");
}

absl::Status Trainer::RestoreOnto(const TrainingSnapshot& snapshot,
                                  const Device& device) {
  MIXRT_RETURN_IF_ERROR(snapshot.Restore(*model_, *optimizer_, device));
  device_ = device;
  scaler_ = std::make_unique<GradScaler>(device_, scaler_options_);
  if (!snapshot.scaler_state().empty()) {
    MIXRT_RETURN_IF_ERROR(scaler_->load_state_dict(snapshot.scaler_state()));
  }
  compiled_.reset();  // Made again for the new backend on the next forward.
  step_ = snapshot.step();
  micro_ = 0;
  return absl::OkStatus();
}

absl::Status Trainer::switch_device(const Device& device) {
  if (micro_ != 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "switch_device: in the middle of an accumulation (micro-batch ", micro_,
        " of ", options_.accumulation_steps,
        "); switch between optimizer steps"));
  }
  MIXRT_ASSIGN_OR_RETURN(
      TrainingSnapshot now,
      TrainingSnapshot::Take(*model_, *optimizer_, scaler_.get(), step_));
  MIXRT_RETURN_IF_ERROR(RestoreOnto(now, device));
  if (options_.snapshot_every > 0) {
    snapshot_ = std::move(now);
    since_snapshot_.clear();
  }
  return absl::OkStatus();
}

absl::StatusOr<Tensor> Trainer::FailOver(const absl::Status& why) {
  const std::string failed = device_.ToString();
  absl::StatusOr<Device> next = FailoverDevice();
  if (!next.ok()) {
    return absl::UnavailableError(absl::StrCat(
        why.message(),
        "; the Trainer could not fail over: ", next.status().message()));
  }
  MIXRT_RETURN_IF_ERROR(RestoreOnto(*snapshot_, *next));
  // Replay what ran since the snapshot, the failed micro-batch last, with
  // the learning rates each ran with.
  const std::vector<RecordedBatch> replay = std::move(since_snapshot_);
  since_snapshot_.clear();
  Tensor loss;
  for (const RecordedBatch& batch : replay) {
    for (size_t g = 0; g < batch.group_lrs.size(); ++g) {
      MIXRT_RETURN_IF_ERROR(optimizer_->set_group_lr(g, batch.group_lrs[g]));
    }
    MIXRT_ASSIGN_OR_RETURN(Tensor input, batch.input.On(device_));
    MIXRT_ASSIGN_OR_RETURN(Tensor target, batch.target.On(device_));
    MIXRT_ASSIGN_OR_RETURN(loss, StepOnce(input, target));
    since_snapshot_.push_back(batch);
  }
  failovers_.push_back(absl::StrCat(
      failed, " failed (", why.message(), "); restored step ",
      snapshot_->step(), " onto ", device_.ToString(), ", replayed ",
      replay.size(), " micro-batch", replay.size() == 1 ? "" : "es"));
  std::fprintf(stderr, "mixrt Trainer: %s\n", failovers_.back().c_str());
  return loss;
}

absl::StatusOr<Tensor> Trainer::StepOnce(const Tensor& input,
                                         const Tensor& target) {
  model_->train();
  Tensor loss;
  {
    AutocastGuard autocast(device_.type(), Autocast());
    MIXRT_ASSIGN_OR_RETURN(Tensor output, Forward(input));
    MIXRT_ASSIGN_OR_RETURN(loss, criterion_(output, target));
  }
  Tensor to_backprop = loss;
  if (options_.accumulation_steps > 1) {
    // Each micro-batch contributes its share of the effective batch's mean.
    MIXRT_ASSIGN_OR_RETURN(to_backprop,
                           scale(loss, 1.0 / options_.accumulation_steps));
  }
  MIXRT_ASSIGN_OR_RETURN(Tensor scaled, scaler_->scale(to_backprop));
  {
    // Only the last micro-batch of an accumulation all-reduces.
    std::optional<distributed::DistributedDataParallel::NoSync> no_sync;
    if (ddp_ != nullptr && micro_ + 1 < options_.accumulation_steps) {
      no_sync.emplace(ddp_.get());
    }
    MIXRT_RETURN_IF_ERROR(scaled.backward());
  }
  if (++micro_ == options_.accumulation_steps) {
    micro_ = 0;
    if (options_.clip_grad_norm.has_value()) {
      MIXRT_RETURN_IF_ERROR(scaler_->unscale_(*optimizer_));
      MIXRT_RETURN_IF_ERROR(
          clip_grad_norm_(optimizer_->params(), *options_.clip_grad_norm)
              .status());
    }
    MIXRT_RETURN_IF_ERROR(scaler_->step(*optimizer_));
    MIXRT_RETURN_IF_ERROR(scaler_->update());
    optimizer_->zero_grad();
    ++step_;
  }
  return loss.detach();
}

absl::StatusOr<EvalResult> Trainer::evaluate(
    const std::vector<Tensor>& inputs, const std::vector<Tensor>& targets) {
  model_->eval();
  InferenceModeGuard inference;
  AutocastGuard autocast(device_.type(), Autocast());
  EvalResult result;
  int64_t correct = 0, total = 0;
  for (size_t i = 0; i < inputs.size(); ++i) {
    MIXRT_ASSIGN_OR_RETURN(Tensor output, Forward(inputs[i]));
    MIXRT_ASSIGN_OR_RETURN(Tensor loss, criterion_(output, targets[i]));
    MIXRT_ASSIGN_OR_RETURN(double l, loss.item());
    result.loss += l / static_cast<double>(inputs.size());
    if (targets[i].dtype() == DType::kI64 && output.ndim() == 2) {
      MIXRT_ASSIGN_OR_RETURN(std::vector<double> logits,
                             output.to_double_vector());
      MIXRT_ASSIGN_OR_RETURN(std::vector<int64_t> labels,
                             targets[i].to_int_vector());
      const int64_t classes = output.shape()[1];
      for (size_t r = 0; r < labels.size(); ++r) {
        int64_t best = 0;
        for (int64_t c = 1; c < classes; ++c) {
          if (logits[r * classes + c] > logits[r * classes + best]) best = c;
        }
        correct += best == labels[r];
        ++total;
      }
    }
  }
  double batches = static_cast<double>(inputs.size());
  if (options_.process_group != nullptr) {
    // Every rank evaluated its shard: sum the loss, batches and counts.
    MIXRT_ASSIGN_OR_RETURN(
        Tensor sums,
        from_floats({static_cast<float>(result.loss * batches),
                     static_cast<float>(batches), static_cast<float>(correct),
                     static_cast<float>(total)},
                    {4}, DType::kF32, device_));
    MIXRT_ASSIGN_OR_RETURN(
        distributed::Work work,
        options_.process_group->AllReduce(sums, distributed::ReduceOp::kSum));
    MIXRT_RETURN_IF_ERROR(work.Wait());
    MIXRT_ASSIGN_OR_RETURN(std::vector<double> v, sums.to_double_vector());
    batches = v[1];
    result.loss = batches > 0 ? v[0] / batches : 0;
    correct = static_cast<int64_t>(v[2]);
    total = static_cast<int64_t>(v[3]);
  }
  result.accuracy = total > 0 ? static_cast<double>(correct) / total : 0;
  model_->train();
  return result;
}

absl::StatusOr<std::vector<std::string>> Trainer::non_finite_gradients() const {
  std::vector<std::string> names;
  for (const auto& [name, p] : model_->named_parameters()) {
    if (!p.grad().defined()) continue;
    MIXRT_ASSIGN_OR_RETURN(Tensor m, kernels::abs_max(p.grad()));
    MIXRT_ASSIGN_OR_RETURN(double v, m.item());
    if (!std::isfinite(v)) names.push_back(name);
  }
  return names;
}

absl::Status Trainer::ClaimLocally(const std::string& path) {
  if (claimed_.count(path) > 0) return absl::OkStatus();
  MIXRT_ASSIGN_OR_RETURN(files::FileLock lock, ClaimCheckpointPath(path));
  claimed_.emplace(path, std::move(lock));
  return absl::OkStatus();
}

absl::Status Trainer::claim_checkpoint_path(const std::string& path) {
  if (options_.process_group == nullptr) return ClaimLocally(path);
  distributed::ProcessGroup& group = *options_.process_group;
  return distributed::AgreeOnOutcome(
      group, device_, group.rank() == 0 ? ClaimLocally(path) : absl::OkStatus(),
      absl::StrCat("claiming checkpoint path ", path, " on rank 0"));
}

absl::Status Trainer::save_checkpoint(const std::string& path) {
  TrainingState state{model_.get(), optimizer_.get(), scaler_.get(), nullptr,
                      step_};
  if (options_.process_group != nullptr) {
    // Only rank 0 writes, so only it claims the path; a failed claim must
    // still reach its peers, or they wait for the write until the timeout.
    const absl::Status claimed = options_.process_group->rank() == 0
                                     ? ClaimLocally(path)
                                     : absl::OkStatus();
    return distributed::SaveDistributedCheckpoint(*options_.process_group, path,
                                                  state, claimed);
  }
  MIXRT_RETURN_IF_ERROR(ClaimLocally(path));
  return SaveTrainingCheckpoint(path, state);
}

absl::Status Trainer::load_checkpoint(const std::string& path) {
  TrainingState state{model_.get(), optimizer_.get(), scaler_.get(), nullptr,
                      0};
  if (options_.process_group != nullptr) {
    MIXRT_RETURN_IF_ERROR(distributed::LoadDistributedCheckpoint(
                              *options_.process_group, path, state)
                              .status());
  } else {
    MIXRT_RETURN_IF_ERROR(LoadTrainingCheckpoint(path, state));
  }
  step_ = state.step;
  return absl::OkStatus();
}

}  // namespace mixrt
