#include "core/distributed/distributed_checkpoint.h"

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "core/distributed/zero_redundancy_optimizer.h"
#include "mixrt/status_macros.h"

namespace mixrt::distributed {
namespace {

absl::StatusOr<Device> DeviceOf(const TrainingState& state) {
  if (state.model != nullptr) {
    for (const Tensor& p : state.model->parameters()) return p.device();
  }
  return absl::InvalidArgumentError(
      "distributed checkpoint: the state needs a model with parameters");
}

}  // namespace

absl::Status SaveDistributedCheckpoint(ProcessGroup& group,
                                       const std::string& path,
                                       TrainingState state,
                                       const absl::Status& rank0_ready) {
  MIXRT_ASSIGN_OR_RETURN(Device device, DeviceOf(state));
  // A sharded optimizer's state is whole on rank 0 only once every rank
  // sent its shard there.
  if (auto* zero = dynamic_cast<ZeroRedundancyOptimizer*>(state.optimizer)) {
    MIXRT_RETURN_IF_ERROR(zero->consolidate_state_dict(0));
  }
  MIXRT_RETURN_IF_ERROR(group.Barrier());
  absl::Status written;
  if (group.rank() == 0) {
    state.metadata["world_size"] = static_cast<uint64_t>(group.world_size());
    written =
        rank0_ready.ok() ? SaveTrainingCheckpoint(path, state) : rank0_ready;
  }
  return AgreeOnOutcome(group, device, written,
                        absl::StrCat("saving checkpoint ", path, " on rank 0"));
}

absl::StatusOr<int> LoadDistributedCheckpoint(ProcessGroup& group,
                                              const std::string& path,
                                              TrainingState& state) {
  MIXRT_ASSIGN_OR_RETURN(Device device, DeviceOf(state));
  const absl::Status loaded = LoadTrainingCheckpoint(path, state);
  MIXRT_RETURN_IF_ERROR(AgreeOnOutcome(
      group, device, loaded, absl::StrCat("loading checkpoint ", path)));
  const auto it = state.metadata.find("world_size");
  return it == state.metadata.end() ? 1 : static_cast<int>(it->second);
}

}  // namespace mixrt::distributed
