// Checkpoints of a data-parallel run. Every rank calls both functions.
//
// Saving: a ZeroRedundancyOptimizer's shards consolidated on rank 0, a
// barrier (every rank has finished the step, so rank 0's replica is the
// one all ranks hold), then rank 0 alone writes the file
// atomically (SaveTrainingCheckpoint: a reader sees the old file or the
// whole new one, never a part), recording the world size as
// "meta.world_size"; then every rank learns rank 0's outcome, so a failed
// write fails on every rank instead of leaving the others training on.
//
// Loading: every rank reads the same file (a shared file system on a
// cluster). The replicas and the optimizer state are whole on every rank,
// so a run may resume on another number of ranks; the returned world size
// is the saving run's, for the caller's bookkeeping (a global batch kept
// constant means a per-rank batch of global / world size).
#ifndef MIXRT_CORE_DISTRIBUTED_DISTRIBUTED_CHECKPOINT_H_
#define MIXRT_CORE_DISTRIBUTED_DISTRIBUTED_CHECKPOINT_H_

#include <string>

#include "absl/status/statusor.h"
#include "core/distributed/process_group.h"
#include "core/io/checkpoint.h"

namespace mixrt::distributed {

// `rank0_ready`: a failure rank 0 already had before writing (claiming the
// path): it writes nothing, and every rank returns the failure instead of
// waiting for a write that never comes.
absl::Status SaveDistributedCheckpoint(
    ProcessGroup& group, const std::string& path, TrainingState state,
    const absl::Status& rank0_ready = absl::OkStatus());

// Returns the world size the checkpoint was written with (1 for a
// checkpoint of a single-process run).
absl::StatusOr<int> LoadDistributedCheckpoint(ProcessGroup& group,
                                              const std::string& path,
                                              TrainingState& state);

}  // namespace mixrt::distributed

#endif  // MIXRT_CORE_DISTRIBUTED_DISTRIBUTED_CHECKPOINT_H_
