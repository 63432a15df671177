#include "plugins/reference/reference_kernels.h"

#include <vector>

namespace mixrt::reference {

const sdk::OpTable& ReferenceOps() {
  static const sdk::OpTable* const ops = [] {
    std::vector<sdk::OpTable::Row> rows;
    for (std::vector<sdk::OpTable::Row> (*group)() :
         {CreationOps, PointwiseOps, ReduceOps, MatmulOps, SoftmaxNormOps,
          LossOps, OptimizerOps, ConvPoolOps, BatchNormEmbeddingOps,
          AttentionOps, DropoutOps}) {
      for (const sdk::OpTable::Row& row : group()) rows.push_back(row);
    }
    return new sdk::OpTable("reference", rows, sdk::kAllDTypes);
  }();
  return *ops;
}

sdk::Status RunKernel(const sdk::KernelCall& call) {
  return ReferenceOps().Run(call);
}

}  // namespace mixrt::reference
