// Makes every rank's GradScaler take the same decision when the ranks
// unscale different gradients (a sharded optimizer, gradients reduced by
// hand): each unscale_ all-reduces found_inf with max, so an inf on any
// rank skips the step everywhere. DistributedDataParallel does not need it:
// its ranks unscale identical gradients (see distributed_data_parallel.h);
// it costs one 4-byte all-reduce per step and a wait for it.
#ifndef MIXRT_CORE_DISTRIBUTED_GRAD_SCALER_SYNC_H_
#define MIXRT_CORE_DISTRIBUTED_GRAD_SCALER_SYNC_H_

#include <memory>

#include "core/amp/grad_scaler/grad_scaler.h"
#include "core/distributed/process_group.h"

namespace mixrt::distributed {

// The scaler keeps `group` alive.
void SyncFoundInf(GradScaler& scaler, std::shared_ptr<ProcessGroup> group);

}  // namespace mixrt::distributed

#endif  // MIXRT_CORE_DISTRIBUTED_GRAD_SCALER_SYNC_H_
