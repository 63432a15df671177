// Naive, portable kernels of the reference plugin: the numerical oracle.
// Floating math runs in double and is rounded once on store (through f32 for
// f16/bf16); integer math runs in int64 with two's-complement wrap;
// reductions accumulate in double.
#ifndef MIXRT_PLUGINS_REFERENCE_REFERENCE_KERNELS_H_
#define MIXRT_PLUGINS_REFERENCE_REFERENCE_KERNELS_H_

#include <vector>

#include "absl/status/status.h"
#include "mixrt/status_macros.h"
#include "plugins/sdk/call_checks.h"
#include "plugins/sdk/op_table.h"
#include "plugins/sdk/plugin.h"

namespace mixrt::reference {

// The plugin's op table: every group's rows.
sdk::Status RunKernel(const sdk::KernelCall& call);

// The kernels RunKernel dispatches to (what the plugin claims per op);
// they take integer tensors where the op allows.
const sdk::OpTable& ReferenceOps();

// One group per file, each giving its ops' rows of the table.
std::vector<sdk::OpTable::Row> CreationOps();   // fill, copy, arange, random
std::vector<sdk::OpTable::Row> PointwiseOps();  // binary, unary, compare, ...
std::vector<sdk::OpTable::Row> ReduceOps();     // reduce, multi_tensor_norm
std::vector<sdk::OpTable::Row> MatmulOps();
std::vector<sdk::OpTable::Row> SoftmaxNormOps();  // softmax, layer_norm
std::vector<sdk::OpTable::Row> LossOps();
std::vector<sdk::OpTable::Row> OptimizerOps();  // grad scaler, SGD, AdamW
std::vector<sdk::OpTable::Row> ConvPoolOps();
std::vector<sdk::OpTable::Row> BatchNormEmbeddingOps();
std::vector<sdk::OpTable::Row> AttentionOps();  // fused SDPA
std::vector<sdk::OpTable::Row> DropoutOps();

using sdk::ExpectArity;
using sdk::ExpectSameShapes;

// A kernel whose call is checked first: kInputs inputs and one output, all
// of one shape when kCheckShapes.
inline constexpr bool kSameShapes = true;
template <size_t kInputs, auto kKernel, bool kCheckShapes = false>
sdk::Status WithArity(const sdk::KernelCall& call) {
  MIXRT_RETURN_IF_ERROR(ExpectArity(call, kInputs, kInputs, 1));
  if (kCheckShapes) MIXRT_RETURN_IF_ERROR(ExpectSameShapes(call));
  return kKernel(call);
}

}  // namespace mixrt::reference

#endif  // MIXRT_PLUGINS_REFERENCE_REFERENCE_KERNELS_H_
