#include "core/distributed/distributed_data_parallel.h"

#include <algorithm>
#include <chrono>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/autograd/engine.h"
#include "core/autograd/grad_mode.h"
#include "core/kernels/fill_copy.h"
#include "core/kernels/pointwise.h"
#include "core/tensor/factories.h"
#include "mixrt/status_macros.h"

namespace mixrt::distributed {
namespace {

// A parameter list as integers: per parameter its dtype, rank and sizes.
std::vector<int64_t> Signature(
    const std::vector<std::pair<std::string, Tensor>>& params) {
  std::vector<int64_t> sig;
  for (const auto& [name, t] : params) {
    sig.push_back(static_cast<int64_t>(t.dtype()));
    sig.push_back(t.ndim());
    for (int64_t d : t.shape()) sig.push_back(d);
  }
  return sig;
}

// Parameter `index` of a signature, as "[64, 32] f32"; "none" past its end.
std::string Describe(const std::vector<int64_t>& sig, size_t start, size_t end,
                     int index) {
  size_t at = start;
  for (int i = 0; at + 1 < end; ++i) {
    const int64_t ndim = sig[at + 1];
    if (ndim < 0 || at + 2 + ndim > end) break;
    if (i == index) {
      std::vector<int64_t> dims(sig.begin() + at + 2,
                                sig.begin() + at + 2 + ndim);
      return absl::StrCat("[", absl::StrJoin(dims, ", "), "] ",
                          DTypeName(static_cast<DType>(sig[at])));
    }
    at += 2 + ndim;
  }
  return "none (it has fewer parameters)";
}

// Every rank's `mine` (the same length on every rank), rank by rank.
absl::StatusOr<std::vector<int64_t>> AllGatherInts(
    ProcessGroup& group, const Device& device,
    const std::vector<int64_t>& mine) {
  const int64_t n = static_cast<int64_t>(mine.size());
  MIXRT_ASSIGN_OR_RETURN(Tensor local,
                         from_ints(mine, {n}, DType::kI64, device));
  MIXRT_ASSIGN_OR_RETURN(Tensor all,
                         zeros({group.world_size() * n}, DType::kI64, device));
  MIXRT_ASSIGN_OR_RETURN(Work work, group.AllGather(local, all));
  MIXRT_RETURN_IF_ERROR(work.Wait());
  return all.to_int_vector();
}

}  // namespace

absl::StatusOr<std::shared_ptr<DistributedDataParallel>>
DistributedDataParallel::Create(std::shared_ptr<nn::Module> module,
                                std::shared_ptr<ProcessGroup> group,
                                DistributedDataParallelOptions options) {
  if (module == nullptr || group == nullptr) {
    return absl::InvalidArgumentError(
        "DistributedDataParallel: a module and a process group are required");
  }
  if (!(options.bucket_cap_mb > 0) || !(options.first_bucket_cap_mb > 0)) {
    return absl::InvalidArgumentError(
        "DistributedDataParallel: bucket sizes must be positive");
  }
  std::shared_ptr<DistributedDataParallel> ddp(new DistributedDataParallel);
  ddp->module_ = module;
  ddp->group_ = std::move(group);
  ddp->options_ = options;
  if (options.comm_hook == CommHook::kPowerSgd) {
    MIXRT_ASSIGN_OR_RETURN(
        ddp->power_sgd_, PowerSgdHook::Create(options.power_sgd, ddp->group_));
  }
  ddp->register_module("module", module);
  for (auto& [name, t] : module->named_parameters()) {
    if (t.requires_grad()) ddp->params_.emplace_back(name, t);
  }
  MIXRT_RETURN_IF_ERROR(ddp->CheckSameParameters());
  {
    std::vector<Tensor> state = module->parameters();
    for (auto& [name, t] : module->named_buffers()) state.push_back(t);
    MIXRT_RETURN_IF_ERROR(ddp->BroadcastFromRankZero(state));
  }

  // Buckets in reverse registration order, one dtype each.
  const int n = static_cast<int>(ddp->params_.size());
  ddp->slots_.resize(n);
  ddp->has_grad_.assign(n, false);
  const auto cap_bytes = [&options](int bucket) {
    return static_cast<int64_t>(
        (bucket == 0 ? options.first_bucket_cap_mb : options.bucket_cap_mb) *
        1024 * 1024);
  };
  int open = -1;
  for (int p = n - 1; p >= 0; --p) {
    const Tensor& t = ddp->params_[p].second;
    const int64_t size = static_cast<int64_t>(DTypeSize(t.dtype()));
    const bool fits =
        open >= 0 && ddp->buckets_[open].dtype == t.dtype() &&
        (ddp->buckets_[open].numel + t.numel()) * size <= cap_bytes(open);
    if (!fits) {
      ddp->buckets_.emplace_back();
      open = static_cast<int>(ddp->buckets_.size()) - 1;
      ddp->buckets_[open].dtype = t.dtype();
    }
    Bucket& b = ddp->buckets_[open];
    ddp->slots_[p] = {open, b.numel};
    ++b.size;
    b.numel += t.numel();
  }

  DistributedDataParallel* self = ddp.get();
  for (int p = 0; p < n; ++p) {
    MIXRT_ASSIGN_OR_RETURN(
        int id, ddp->params_[p].second.register_post_accumulate_grad_hook(
                    [self, p](const Tensor& grad) {
                      return self->OnGradient(p, grad);
                    }));
    ddp->hook_ids_.push_back(id);
  }
  return ddp;
}

DistributedDataParallel::~DistributedDataParallel() {
  for (size_t p = 0; p < hook_ids_.size(); ++p) {
    params_[p].second.remove_post_accumulate_grad_hook(hook_ids_[p]);
  }
  AbandonBackward();
}

absl::Status DistributedDataParallel::CheckSameParameters() {
  if (group_->world_size() == 1) return absl::OkStatus();
  // Rank 0 names the device for the exchange; a module without parameters
  // still takes part (its peers must learn that it has none).
  const std::vector<int64_t> mine = Signature(params_);
  Device device;
  for (auto& [name, t] : module_->named_parameters()) {
    device = t.device();
    break;
  }
  if (!device.valid()) {
    return params_.empty() ? absl::OkStatus()
                           : absl::InternalError("no device");
  }
  const int world = group_->world_size();
  MIXRT_ASSIGN_OR_RETURN(
      std::vector<int64_t> sizes,
      AllGatherInts(*group_, device, {static_cast<int64_t>(mine.size())}));
  int64_t longest = 1;
  for (int64_t s : sizes) longest = std::max(longest, s);
  std::vector<int64_t> padded = mine;
  padded.resize(longest, -1);
  MIXRT_ASSIGN_OR_RETURN(std::vector<int64_t> sigs,
                         AllGatherInts(*group_, device, padded));
  // Every rank compares every rank against rank 0, so all fail alike.
  auto begin = [&](int r) { return static_cast<size_t>(r * longest); };
  for (int r = 1; r < world; ++r) {
    const size_t a = begin(0), ae = a + sizes[0];
    const size_t b = begin(r), be = b + sizes[r];
    if (std::equal(sigs.begin() + a, sigs.begin() + ae, sigs.begin() + b,
                   sigs.begin() + be)) {
      continue;
    }
    for (int i = 0;; ++i) {
      const std::string zero = Describe(sigs, a, ae, i);
      const std::string other = Describe(sigs, b, be, i);
      if (zero == other) continue;
      const std::string here =
          i < static_cast<int>(params_.size())
              ? absl::StrCat(" ('", params_[i].first, "' on rank ",
                             group_->rank(), ")")
              : "";
      return absl::FailedPreconditionError(
          absl::StrCat("DistributedDataParallel: rank ", r,
                       "'s parameters differ from rank 0's: parameter ", i,
                       here, " is ", other, " on rank ", r, " but ", zero,
                       " on rank 0 (every rank must build the same model)"));
    }
  }
  return absl::OkStatus();
}

absl::Status DistributedDataParallel::BroadcastFromRankZero(
    const std::vector<Tensor>& tensors) {
  if (group_->world_size() == 1) return absl::OkStatus();
  std::vector<Work> works;
  for (const Tensor& t : tensors) {
    if (!t.is_contiguous()) {
      return absl::FailedPreconditionError(
          "DistributedDataParallel: parameters and buffers must be "
          "contiguous to be broadcast");
    }
    MIXRT_ASSIGN_OR_RETURN(Work w, group_->Broadcast(t, 0));
    works.push_back(std::move(w));
  }
  for (Work& w : works) MIXRT_RETURN_IF_ERROR(w.Wait());
  return absl::OkStatus();
}

absl::StatusOr<Tensor> DistributedDataParallel::forward(const Tensor& x) {
  // A backward that failed half-way left buckets in flight; its peers are
  // out of step, so the error it returned is the one to act on. Here the
  // state is only made safe to reuse.
  AbandonBackward();
  MIXRT_RETURN_IF_ERROR(CheckSameFirstInput(x));
  MIXRT_RETURN_IF_ERROR(SyncBuffers());
  return module_->forward(x);
}

absl::Status DistributedDataParallel::CheckSameFirstInput(const Tensor& x) {
  if (input_checked_ || group_->world_size() == 1) return absl::OkStatus();
  // A fixed-length signature (one exchange): dtype, rank, element count
  // and the first kMaxDims sizes.
  constexpr int kMaxDims = 8;
  constexpr int64_t kLength = 3 + kMaxDims;
  std::vector<int64_t> mine = {static_cast<int64_t>(x.dtype()), x.ndim(),
                               x.numel()};
  for (int d = 0; d < kMaxDims; ++d)
    mine.push_back(d < x.ndim() ? x.shape()[d] : -1);
  Device device = x.device();
  if (!params_.empty()) device = params_[0].second.device();
  const int world = group_->world_size();
  MIXRT_ASSIGN_OR_RETURN(std::vector<int64_t> sigs,
                         AllGatherInts(*group_, device, mine));
  const auto describe = [&](int r) {
    const int64_t* sig = sigs.data() + r * kLength;
    std::vector<int64_t> dims(
        sig + 3, sig + 3 + std::clamp<int64_t>(sig[1], 0, kMaxDims));
    return absl::StrCat("[", absl::StrJoin(dims, ", "),
                        sig[1] > kMaxDims ? ", ..." : "", "] ",
                        DTypeName(static_cast<DType>(sig[0])));
  };
  // Every rank compares every rank against rank 0, so all fail alike.
  for (int r = 1; r < world; ++r) {
    if (std::equal(sigs.begin(), sigs.begin() + kLength,
                   sigs.begin() + r * kLength))
      continue;
    return absl::FailedPreconditionError(
        absl::StrCat("DistributedDataParallel: rank ", r,
                     "'s first input differs from rank 0's: ", describe(r),
                     " on rank ", r, " but ", describe(0),
                     " on rank 0 (every rank must pass batches of the same "
                     "shape: with different "
                     "batch sizes the ranks run different numbers of steps and "
                     "their collectives cross)"));
  }
  input_checked_ = true;
  return absl::OkStatus();
}

absl::Status DistributedDataParallel::SyncBuffers() {
  // The wrapped module's mode: a Trainer switches it, not this wrapper.
  if (!options_.broadcast_buffers || !module_->is_training()) {
    return absl::OkStatus();
  }
  std::vector<Tensor> buffers;
  for (auto& [name, t] : module_->named_buffers()) buffers.push_back(t);
  return BroadcastFromRankZero(buffers);
}

absl::StatusOr<Tensor> DistributedDataParallel::SlotOf(int param) const {
  const Slot& slot = slots_[param];
  return buckets_[slot.bucket].flat.slice(
      0, slot.offset, slot.offset + params_[param].second.numel());
}

absl::Status DistributedDataParallel::OnGradient(int param,
                                                 const Tensor& grad) {
  if (!sync_) return absl::OkStatus();
  if (!in_backward_) {
    in_backward_ = true;
    next_launch_ = 0;
    std::fill(has_grad_.begin(), has_grad_.end(), false);
    for (Bucket& b : buckets_) {
      b.pending = b.size;
      // Fresh each backward: the previous step's .grad tensors are views of
      // the old buckets and may still be in use.
      MIXRT_ASSIGN_OR_RETURN(b.flat, empty({b.numel}, b.dtype, grad.device()));
    }
    // On the user's backward: a checkpointed region's own backward, run
    // inside it, ends before the other parameters' gradients arrive.
    MIXRT_RETURN_IF_ERROR(
        QueueOutermostBackwardCallback([this] { return FinishBackward(); }));
  }
  if (has_grad_[param]) {
    return absl::FailedPreconditionError(absl::StrCat(
        "DistributedDataParallel: parameter '", params_[param].first,
        "' received a second gradient in one synchronized backward"));
  }
  has_grad_[param] = true;
  MIXRT_ASSIGN_OR_RETURN(Tensor slot, SlotOf(param));
  MIXRT_ASSIGN_OR_RETURN(Tensor flat_grad, grad.reshape({grad.numel()}));
  MIXRT_RETURN_IF_ERROR(kernels::copy_(slot, flat_grad));
  if (--buckets_[slots_[param].bucket].pending == 0) {
    MIXRT_RETURN_IF_ERROR(LaunchReadyBuckets());
  }
  return absl::OkStatus();
}

absl::Status DistributedDataParallel::CanRegisterCommHook() const {
  if (options_.comm_hook != CommHook::kNone) {
    return absl::FailedPreconditionError(
        "register_comm_hook can only be called once");
  }
  if (backward_ran_) {
    return absl::FailedPreconditionError(
        "register_comm_hook must be called before the first backward");
  }
  return absl::OkStatus();
}

absl::Status DistributedDataParallel::register_comm_hook(CommHook hook) {
  MIXRT_RETURN_IF_ERROR(CanRegisterCommHook());
  if (hook == CommHook::kPowerSgd) return register_comm_hook(PowerSgdOptions{});
  options_.comm_hook = hook;
  return absl::OkStatus();
}

absl::Status DistributedDataParallel::register_comm_hook(
    const PowerSgdOptions& power_sgd) {
  MIXRT_RETURN_IF_ERROR(CanRegisterCommHook());
  MIXRT_ASSIGN_OR_RETURN(power_sgd_, PowerSgdHook::Create(power_sgd, group_));
  options_.comm_hook = CommHook::kPowerSgd;
  options_.power_sgd = power_sgd;
  return absl::OkStatus();
}

bool DistributedDataParallel::UsesPowerSgd(const Bucket& b) const {
  return power_sgd_ != nullptr && !power_sgd_->vanilla() &&
         b.dtype == DType::kF32;
}

std::vector<BucketTensor> DistributedDataParallel::LayoutOf(int index) const {
  std::vector<BucketTensor> layout;
  for (size_t p = 0; p < params_.size(); ++p) {
    if (slots_[p].bucket != index) continue;
    const auto shape = params_[p].second.shape();
    layout.push_back(
        {slots_[p].offset, std::vector<int64_t>(shape.begin(), shape.end())});
  }
  return layout;
}

absl::Status DistributedDataParallel::LaunchReadyBuckets() {
  // In bucket order on every rank: collectives must be issued in the same
  // order everywhere, and the order gradients become ready need not be.
  while (next_launch_ < buckets_.size() &&
         buckets_[next_launch_].pending == 0) {
    Bucket& b = buckets_[next_launch_];
    const bool to_16_bits = b.dtype == DType::kF32 &&
                            (options_.comm_hook == CommHook::kBf16Compress ||
                             options_.comm_hook == CommHook::kFp16Compress);
    if (UsesPowerSgd(b)) {
      MIXRT_RETURN_IF_ERROR(
          power_sgd_->Launch(static_cast<int>(next_launch_), b.flat,
                             LayoutOf(static_cast<int>(next_launch_))));
    } else if (!to_16_bits) {
      MIXRT_ASSIGN_OR_RETURN(b.work, group_->AllReduce(b.flat, ReduceOp::kAvg));
    } else {
      // As PyTorch's hook: cast, divide by the world size in the 16-bit
      // type, sum; FinishBackward casts back.
      const DType wire = options_.comm_hook == CommHook::kBf16Compress
                             ? DType::kBF16
                             : DType::kF16;
      MIXRT_ASSIGN_OR_RETURN(Tensor cast, b.flat.to(wire));
      MIXRT_ASSIGN_OR_RETURN(Tensor world,
                             full({}, static_cast<double>(group_->world_size()),
                                  wire, b.flat.device()));
      MIXRT_ASSIGN_OR_RETURN(b.compressed, kernels::div(cast, world));
      MIXRT_ASSIGN_OR_RETURN(b.work,
                             group_->AllReduce(b.compressed, ReduceOp::kSum));
    }
    ++next_launch_;
  }
  return absl::OkStatus();
}

absl::Status DistributedDataParallel::FinishBackward() {
  in_backward_ = false;
  backward_ran_ = true;
  // Parameters this rank's graph did not use contribute zeros, so every
  // rank reduces the same buckets (collectives stay matched even when a
  // rank then reports its unused parameters).
  const int n = static_cast<int>(params_.size());
  for (int p = 0; p < n; ++p) {
    if (has_grad_[p]) continue;
    MIXRT_ASSIGN_OR_RETURN(Tensor slot, SlotOf(p));
    MIXRT_RETURN_IF_ERROR(kernels::fill_(slot, 0.0));
    --buckets_[slots_[p].bucket].pending;
  }
  MIXRT_RETURN_IF_ERROR(LaunchReadyBuckets());
  std::vector<bool> used = has_grad_;
  if (options_.find_unused_parameters) {
    MIXRT_ASSIGN_OR_RETURN(used, UsedOnAnyRank());
  }
  const auto start = std::chrono::steady_clock::now();
  stats_ = CommunicationStats{};
  for (size_t i = 0; i < buckets_.size(); ++i) {
    Bucket& b = buckets_[i];
    if (UsesPowerSgd(b)) {
      MIXRT_RETURN_IF_ERROR(power_sgd_->Finish(static_cast<int>(i), b.flat));
      stats_.bytes += power_sgd_->wire_bytes(static_cast<int>(i));
      continue;
    }
    MIXRT_RETURN_IF_ERROR(b.work.Wait());
    const Tensor& wire = b.compressed.defined() ? b.compressed : b.flat;
    stats_.bytes += b.numel * static_cast<int64_t>(DTypeSize(wire.dtype()));
    if (b.compressed.defined()) {
      MIXRT_RETURN_IF_ERROR(kernels::copy_(b.flat, b.compressed));
      b.compressed = Tensor();
    }
  }
  stats_.exposed_ms = std::chrono::duration<double, std::milli>(
                          std::chrono::steady_clock::now() - start)
                          .count();
  stats_.buckets = static_cast<int>(buckets_.size());
  if (power_sgd_ != nullptr) power_sgd_->EndBackward();
  for (int p = 0; p < n; ++p) {
    if (!used[p]) continue;  // Its .grad stays as it was.
    MIXRT_ASSIGN_OR_RETURN(Tensor slot, SlotOf(p));
    MIXRT_ASSIGN_OR_RETURN(Tensor grad, slot.view(params_[p].second.shape()));
    params_[p].second.set_grad(grad);
  }
  // The .grad views keep the buckets' memory alive.
  for (Bucket& b : buckets_) b.flat = Tensor();
  if (!options_.find_unused_parameters) return UnusedParametersError();
  return absl::OkStatus();
}

absl::StatusOr<std::vector<bool>> DistributedDataParallel::UsedOnAnyRank() {
  const int n = static_cast<int>(params_.size());
  std::vector<bool> used = has_grad_;
  if (group_->world_size() == 1 || n == 0) return used;
  std::vector<float> mine(n);
  for (int p = 0; p < n; ++p) mine[p] = has_grad_[p] ? 1.0f : 0.0f;
  const Device device = params_[0].second.device();
  MIXRT_ASSIGN_OR_RETURN(Tensor flags,
                         from_floats(mine, {n}, DType::kF32, device));
  MIXRT_ASSIGN_OR_RETURN(Work w, group_->AllReduce(flags, ReduceOp::kSum));
  MIXRT_RETURN_IF_ERROR(w.Wait());
  MIXRT_ASSIGN_OR_RETURN(std::vector<float> counts, flags.to_float_vector());
  for (int p = 0; p < n; ++p) used[p] = counts[p] > 0;
  return used;
}

absl::Status DistributedDataParallel::UnusedParametersError() const {
  std::vector<std::string> unused;
  for (size_t p = 0; p < params_.size(); ++p) {
    if (!has_grad_[p]) unused.push_back("'" + params_[p].first + "'");
  }
  if (unused.empty()) return absl::OkStatus();
  constexpr size_t kNamed = 8;
  const size_t more = unused.size() > kNamed ? unused.size() - kNamed : 0;
  unused.resize(std::min(unused.size(), kNamed));
  return absl::FailedPreconditionError(absl::StrCat(
      "DistributedDataParallel: rank ", group_->rank(),
      "'s backward gave no "
      "gradient to parameter",
      unused.size() + more == 1 ? " " : "s ", absl::StrJoin(unused, ", "),
      more > 0 ? absl::StrCat(" and ", more, " more") : "",
      ": the loss did not use ", unused.size() + more == 1 ? "it" : "them",
      ". Pass find_unused_parameters=true to let such parameters keep their "
      ".grad (none after zero_grad, so optimizers leave them alone), or "
      "make the loss use every parameter"));
}

void DistributedDataParallel::AbandonBackward() {
  if (!in_backward_) return;
  for (Bucket& b : buckets_) {
    b.work.Wait().IgnoreError();
    b.flat = Tensor();
    b.compressed = Tensor();
  }
  if (power_sgd_ != nullptr) power_sgd_->Abandon();
  in_backward_ = false;
}

}  // namespace mixrt::distributed
