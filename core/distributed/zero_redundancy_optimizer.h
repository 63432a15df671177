// ZeRO stage 1 (torch.distributed.optim.ZeroRedundancyOptimizer) over
// AdamW: every rank keeps the optimizer state of its shard of the
// parameters only (about 1/N of AdamW's two f32 moments per parameter),
// steps that shard from the gradients DistributedDataParallel averaged,
// then each rank broadcasts its updated shard so every replica is whole
// again. Every parameter steps with the same AdamW arithmetic on the same
// gradient as unsharded AdamW would: the parameters and the consolidated
// state equal unsharded training's bit for bit.
//
//   auto ddp = *DistributedDataParallel::Create(model, group);
//   auto opt = *ZeroRedundancyOptimizer::Create(model->parameters(), group,
//                                               {.lr = 3e-4});
//   ... loss.backward(); opt->step(); opt->zero_grad();
//
// Shards as PyTorch's: per parameter, largest first, to the rank holding
// the fewest elements so far. Checkpoints: SaveDistributedCheckpoint
// consolidates every rank's state onto rank 0 (consolidate_state_dict) and
// writes the whole state, which loads on any number of ranks; each rank
// takes the entries of its own shard.
#ifndef MIXRT_CORE_DISTRIBUTED_ZERO_REDUNDANCY_OPTIMIZER_H_
#define MIXRT_CORE_DISTRIBUTED_ZERO_REDUNDANCY_OPTIMIZER_H_

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "core/distributed/process_group.h"
#include "core/optim/optimizer.h"

namespace mixrt::distributed {

class ZeroRedundancyOptimizer : public Optimizer {
 public:
  // One parameter group; every rank passes the same parameters in the
  // same order (the shards are computed from their sizes alone).
  static absl::StatusOr<std::unique_ptr<ZeroRedundancyOptimizer>> Create(
      std::vector<Tensor> params, std::shared_ptr<ProcessGroup> group,
      AdamWOptions options);

  // A collective: every rank steps its shard, then every shard is
  // broadcast by its owner. With the scaler's found_inf every rank skips.
  absl::Status step(const kernels::StepScaling& scaling = {}) override;

  // This rank's shard, keyed by the parameter's index among all of them
  // ("<i>.exp_avg", as AdamW's); after consolidate_state_dict on this rank,
  // every rank's.
  std::vector<std::pair<std::string, Tensor>> state_dict() const override;
  // Takes the entries of this rank's shard from a whole state (a
  // consolidated one, or an unsharded AdamW's): any world size.
  absl::Status load_state_dict(
      const std::map<std::string, Tensor>& state) override;
  absl::Status check_state_dict(
      const std::map<std::string, Tensor>& state) const override;
  absl::StatusOr<double> momentum() const override;
  absl::Status set_momentum(double beta1) override;

  // A collective: every rank's state gathered on rank `to` (whose
  // state_dict() returns it until the next step); PyTorch's
  // consolidate_state_dict.
  absl::Status consolidate_state_dict(int to = 0);
  // Whether state_dict() returns every rank's state: consolidated onto
  // this rank, and no step or load since.
  bool consolidated() const { return consolidated_.has_value(); }

  // The rank that owns parameter i.
  int owner(size_t i) const { return owner_.at(i); }
  // Bytes of AdamW state this rank holds (its shard's moments and steps).
  uint64_t state_bytes() const;

 private:
  ZeroRedundancyOptimizer(std::vector<Tensor> params,
                          std::shared_ptr<ProcessGroup> group,
                          AdamWOptions options);
  // Every owner's updated parameters broadcast to the other ranks, one
  // flat buffer per owner.
  absl::Status BroadcastShards();
  // The entries of `state` (global keys) for this rank's shard, under the
  // shard optimizer's keys.
  std::map<std::string, Tensor> ShardEntries(
      const std::map<std::string, Tensor>& state) const;
  // The state of `local` under its global keys.
  std::map<std::string, Tensor> GlobalKeys(
      const std::vector<std::pair<std::string, Tensor>>& local) const;

  std::shared_ptr<ProcessGroup> group_;
  AdamWOptions options_;
  std::vector<int> owner_;     // Per parameter.
  std::vector<size_t> owned_;  // Global indices of this rank's parameters.
  std::unique_ptr<AdamW> shard_;
  std::optional<std::map<std::string, Tensor>> consolidated_;
};

}  // namespace mixrt::distributed

#endif  // MIXRT_CORE_DISTRIBUTED_ZERO_REDUNDANCY_OPTIMIZER_H_
