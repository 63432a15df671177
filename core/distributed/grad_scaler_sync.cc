#include "core/distributed/grad_scaler_sync.h"

#include "absl/status/status.h"
#include "mixrt/status_macros.h"

namespace mixrt::distributed {

void SyncFoundInf(GradScaler& scaler, std::shared_ptr<ProcessGroup> group) {
  scaler.set_found_inf_reducer(
      [group = std::move(group)](const Tensor& found_inf) -> absl::Status {
        MIXRT_ASSIGN_OR_RETURN(Work work,
                               group->AllReduce(found_inf, ReduceOp::kMax));
        return work.Wait();
      });
}

}  // namespace mixrt::distributed
