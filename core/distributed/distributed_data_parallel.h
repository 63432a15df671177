// torch.nn.parallel.DistributedDataParallel: every rank holds a replica of
// the module, computes gradients on its shard of the batch, and backward
// leaves every replica with the same averaged gradients.
//
//   MIXRT_ASSIGN_OR_RETURN(auto ddp,
//       distributed::DistributedDataParallel::Create(model, group));
//   MIXRT_ASSIGN_OR_RETURN(Tensor out, ddp->forward(x));   // this rank's shard
//   MIXRT_RETURN_IF_ERROR(scaler.scale(loss)->backward());  // all-reduced
//   MIXRT_RETURN_IF_ERROR(scaler.step(optimizer));          // same on every
//   rank
//
// Construction checks that every rank's parameters have the same shapes and
// dtypes (an error naming the first difference) and copies rank 0's values
// everywhere. Gradients are packed into buckets (25 MiB, the first 1 MiB
// so that communication starts early) in reverse registration order, which
// is roughly the order backward produces them; a bucket's all-reduce starts
// as soon as its last gradient is accumulated and runs on the collectives'
// own thread while backward goes on. The end of backward waits for the
// rest and makes each .grad a view of its reduced bucket.
//
// AMP: the gradients every rank unscales are the same bytes (the all-reduce
// returns identical results everywhere, and inf/NaN survive a sum), so every
// rank's GradScaler finds the same inf and skips the same step with no
// communication of its own. Where gradients are not reduced this way (a
// sharded optimizer, hand-made reductions), SyncFoundInf
// (grad_scaler_sync.h) all-reduces the scaler's verdict instead.
#ifndef MIXRT_CORE_DISTRIBUTED_DISTRIBUTED_DATA_PARALLEL_H_
#define MIXRT_CORE_DISTRIBUTED_DISTRIBUTED_DATA_PARALLEL_H_

#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "core/distributed/power_sgd.h"
#include "core/distributed/process_group.h"
#include "core/nn/module.h"

namespace mixrt::distributed {

// PyTorch's DDP communication hooks (register_comm_hook) that mixrt runs.
enum class CommHook {
  kNone,  // Buckets all-reduced in their own dtype (f32 gradients).
  // torch.distributed.algorithms.ddp_comm_hooks.default_hooks'
  // bf16_compress_hook / fp16_compress_hook: each bucket is cast to the
  // 16-bit type and divided by the world size there, summed across ranks
  // in it, and cast back into the f32 gradients: half the bytes on the
  // wire, gradients rounded to 8 (bf16) or 11 (f16) significant bits. An
  // inf or NaN on any rank (an f16 overflow included) reaches every rank,
  // so every GradScaler skips the same step.
  kBf16Compress,
  kFp16Compress,
  // powerSGD_hook (power_sgd.h): low-rank factors of each f32 gradient
  // matrix on the wire, with error feedback; options in
  // DistributedDataParallelOptions::power_sgd.
  kPowerSgd,
};

struct DistributedDataParallelOptions {
  double bucket_cap_mb = 25;
  double first_bucket_cap_mb = 1;
  // Rank 0's buffers (batch norm statistics) copied to every rank before
  // each forward in training mode, as PyTorch does.
  bool broadcast_buffers = true;
  // PyTorch's find_unused_parameters. Off (the default, as in PyTorch): a
  // backward that leaves a parameter without a gradient on this rank is
  // an error naming it, since a zero gradient would let weight decay and
  // momentum move a parameter the loss never used. On: every backward
  // also all-reduces which parameters each rank used; one no rank used
  // keeps its .grad as it was (none after zero_grad, so optimizers skip
  // it), one that only some ranks used gets their average, the others
  // counting zero, as in PyTorch.
  bool find_unused_parameters = false;
  CommHook comm_hook = CommHook::kNone;
  // PowerSGDState's hyperparameters, when comm_hook is kPowerSgd.
  PowerSgdOptions power_sgd;
};

// What the last synchronized backward communicated.
struct CommunicationStats {
  int buckets = 0;
  int64_t bytes = 0;
  // How long the end of backward waited for all-reduces still in flight:
  // the communication backward did not hide.
  double exposed_ms = 0;
};

class DistributedDataParallel : public nn::Module {
 public:
  static absl::StatusOr<std::shared_ptr<DistributedDataParallel>> Create(
      std::shared_ptr<nn::Module> module, std::shared_ptr<ProcessGroup> group,
      DistributedDataParallelOptions options = {});
  ~DistributedDataParallel() override;

  absl::StatusOr<Tensor> forward(const Tensor& x) override;

  // Copies rank 0's buffers to every rank when broadcast_buffers is set and
  // the wrapped module is training; forward() does it first. For callers
  // that run the module's forward themselves (a compiled Trainer runs the
  // module as a graph).
  absl::Status SyncBuffers();

  // The first call (forward() makes it) compares this rank's input with
  // every other rank's: a different shape or dtype is an error on every
  // rank naming the rank and both. Ranks with different batch sizes run
  // different numbers of steps, and their collectives then cross
  // (MPI_ERR_TRUNCATE after an epoch of mismatched steps). PyTorch allows
  // uneven inputs (with join()); mixrt refuses them at the start. Later
  // calls return at once: a check on every call would be a collective per
  // step. A Trainer running the module compiled calls it itself.
  absl::Status CheckSameFirstInput(const Tensor& x);

  // PyTorch's register_comm_hook for the hooks mixrt runs: before the
  // first backward, once (a second call, or one after a backward, is an
  // error, as in PyTorch).
  absl::Status register_comm_hook(CommHook hook);
  // register_comm_hook(PowerSGDState(...), powerSGD_hook).
  absl::Status register_comm_hook(const PowerSgdOptions& power_sgd);
  // The PowerSGD hook's state (its iteration, compression), or null.
  const PowerSgdHook* power_sgd_hook() const { return power_sgd_.get(); }

  nn::Module& module() { return *module_; }
  const std::shared_ptr<nn::Module>& module_ptr() const { return module_; }
  ProcessGroup& group() { return *group_; }
  int bucket_count() const { return static_cast<int>(buckets_.size()); }
  const CommunicationStats& last_stats() const { return stats_; }

  // PyTorch's no_sync(): while the returned guard lives, backward only
  // accumulates local gradients; the first backward after it reduces the
  // accumulated sum (gradient accumulation with one all-reduce per step).
  class NoSync {
   public:
    explicit NoSync(DistributedDataParallel* ddp)
        : ddp_(ddp), previous_(ddp->sync_) {
      ddp_->sync_ = false;
    }
    ~NoSync() { ddp_->sync_ = previous_; }
    NoSync(const NoSync&) = delete;
    NoSync& operator=(const NoSync&) = delete;

   private:
    DistributedDataParallel* ddp_;
    bool previous_;
  };
  NoSync no_sync() { return NoSync(this); }

 private:
  struct Bucket {
    DType dtype = DType::kF32;
    int size = 0;  // Parameters in it.
    int64_t numel = 0;
    Tensor flat;
    Tensor compressed;  // The 16-bit copy on the wire (a comm hook).
    int pending = 0;
    Work work;
  };
  // Where a parameter's gradient lives in the buckets.
  struct Slot {
    int bucket = 0;
    int64_t offset = 0;
  };

  DistributedDataParallel() = default;
  absl::Status CheckSameParameters();
  absl::Status BroadcastFromRankZero(const std::vector<Tensor>& tensors);
  // Parameter `param`'s elements of its bucket's current flat tensor.
  absl::StatusOr<Tensor> SlotOf(int param) const;
  absl::Status OnGradient(int param, const Tensor& grad);
  absl::Status LaunchReadyBuckets();
  // Refuses a second hook, or one after the first backward (PyTorch's).
  absl::Status CanRegisterCommHook() const;
  // Whether this backward reduces `b` with PowerSGD (the hook's iteration
  // moves only after the last bucket, so launch and finish agree).
  bool UsesPowerSgd(const Bucket& b) const;
  // Where bucket `index`'s gradients sit in its flat tensor.
  std::vector<BucketTensor> LayoutOf(int index) const;
  absl::Status FinishBackward();
  // Which parameters some rank used in this backward (all-reduced).
  absl::StatusOr<std::vector<bool>> UsedOnAnyRank();
  absl::Status UnusedParametersError() const;
  void AbandonBackward();

  std::shared_ptr<nn::Module> module_;
  std::shared_ptr<ProcessGroup> group_;
  DistributedDataParallelOptions options_;
  std::vector<std::pair<std::string, Tensor>> params_;
  std::vector<int> hook_ids_;
  std::vector<Bucket> buckets_;
  std::vector<Slot> slots_;  // By parameter.
  std::vector<bool> has_grad_;
  bool sync_ = true;
  bool in_backward_ = false;
  bool input_checked_ = false;
  bool backward_ran_ = false;
  size_t next_launch_ = 0;
  CommunicationStats stats_;
  std::unique_ptr<PowerSgdHook> power_sgd_;
};

}  // namespace mixrt::distributed

#endif  // MIXRT_CORE_DISTRIBUTED_DISTRIBUTED_DATA_PARALLEL_H_
