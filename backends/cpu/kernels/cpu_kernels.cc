#include "backends/cpu/kernels/cpu_kernels.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "backends/cpu/kernels/cpu_attention.h"
#include "backends/cpu/kernels/cpu_batch_norm_embedding.h"
#include "backends/cpu/kernels/cpu_conv.h"
#include "backends/cpu/kernels/cpu_creation.h"
#include "backends/cpu/kernels/cpu_dropout.h"
#include "backends/cpu/kernels/cpu_loss.h"
#include "backends/cpu/kernels/cpu_matmul.h"
#include "backends/cpu/kernels/cpu_optimizer.h"
#include "backends/cpu/kernels/cpu_pointwise.h"
#include "backends/cpu/kernels/cpu_pool.h"
#include "backends/cpu/kernels/cpu_reduce.h"
#include "backends/cpu/kernels/cpu_softmax_norm.h"
#include "backends/cpu/kernels/dense_call.h"
#include "backends/cpu/onednn/onednn_context.h"
#include "oneapi/dnnl/dnnl.hpp"
#include "plugins/sdk/op_table.h"

namespace mixrt::cpu {
namespace {

// The kernels that index their tensors densely get strided (or broadcast)
// operands gathered into dense buffers first, and dense outputs copied
// back after.
template <auto kKernel>
absl::Status Dense(const sdk::KernelCall& call) {
  return RunDense(call, kKernel);
}

}  // namespace

// One row per op (docs/contributing.md, "Add an op").
const sdk::OpTable& CpuOps() {
  static const sdk::OpTable* const ops = new sdk::OpTable(
      "cpu",
      {
          {MIXRT_OP_FILL, RunFill},
          {MIXRT_OP_COPY, RunCopy},
          {MIXRT_OP_ARANGE, RunArange},
          {MIXRT_OP_RANDOM_UNIFORM, RunRandomUniform},
          {MIXRT_OP_RANDOM_NORMAL, RunRandomNormal},
          {MIXRT_OP_BINARY, Dense<RunBinary>},
          {MIXRT_OP_UNARY, Dense<RunUnary>},
          {MIXRT_OP_UNARY_BACKWARD, Dense<RunUnaryBackward>},
          {MIXRT_OP_COMPARE, Dense<RunCompare>},
          {MIXRT_OP_WHERE, Dense<RunWhere>},
          {MIXRT_OP_REDUCE, Dense<RunReduce>},
          {MIXRT_OP_MULTI_TENSOR_NORM, Dense<RunMultiTensorNorm>},
          {MIXRT_OP_MATMUL, RunMatmul},
          {MIXRT_OP_SOFTMAX, Dense<RunSoftmax>},
          {MIXRT_OP_LOG_SOFTMAX, Dense<RunSoftmax>},
          {MIXRT_OP_SOFTMAX_BACKWARD, Dense<RunSoftmaxBackward>},
          {MIXRT_OP_LOG_SOFTMAX_BACKWARD, Dense<RunSoftmaxBackward>},
          {MIXRT_OP_LAYER_NORM, Dense<RunLayerNorm>},
          {MIXRT_OP_LAYER_NORM_BACKWARD, Dense<RunLayerNormBackward>},
          {MIXRT_OP_CROSS_ENTROPY, Dense<RunLoss>},
          {MIXRT_OP_CROSS_ENTROPY_BACKWARD, Dense<RunLoss>},
          {MIXRT_OP_NON_FINITE_CHECK_AND_UNSCALE,
           Dense<RunNonFiniteCheckAndUnscale>},
          {MIXRT_OP_UPDATE_SCALE, Dense<RunUpdateScale>},
          {MIXRT_OP_SGD_STEP, Dense<RunSgdStep>},
          {MIXRT_OP_MULTI_TENSOR_SGD_STEP, Dense<RunMultiTensorSgdStep>},
          {MIXRT_OP_ADAMW_STEP, Dense<RunAdamWStep>},
          {MIXRT_OP_CONV2D, RunConv2d},
          {MIXRT_OP_CONV2D_BACKWARD_DATA, RunConv2dBackwardData},
          {MIXRT_OP_CONV2D_BACKWARD_WEIGHTS, RunConv2dBackwardWeights},
          {MIXRT_OP_POOL2D, Dense<RunPool>},
          {MIXRT_OP_POOL2D_BACKWARD, Dense<RunPool>},
          // The mask may keep broadcast strides.
          {MIXRT_OP_SCALED_DOT_PRODUCT_ATTENTION, RunAttention},
          {MIXRT_OP_SCALED_DOT_PRODUCT_ATTENTION_BACKWARD, RunAttention},
          {MIXRT_OP_DROPOUT, Dense<RunDropout>},
          {MIXRT_OP_BATCH_NORM, Dense<RunBatchNorm>},
          {MIXRT_OP_BATCH_NORM_BACKWARD, Dense<RunBatchNormBackward>},
          {MIXRT_OP_EMBEDDING, Dense<RunEmbedding>},
          {MIXRT_OP_EMBEDDING_BACKWARD, Dense<RunEmbeddingBackward>},
      },
      sdk::kAllDTypes);
  return *ops;
}

absl::Status RunKernel(const sdk::KernelCall& call) {
  try {
    return CpuOps().Run(call);
  } catch (const dnnl::error& e) {
    std::string tensors;
    for (const sdk::TensorRef& t : call.inputs) {
      absl::StrAppend(&tensors, " ", DescKey(t));
    }
    absl::StrAppend(&tensors, " ->");
    for (const sdk::TensorRef& t : call.outputs) {
      absl::StrAppend(&tensors, " ", DescKey(t));
    }
    absl::StrAppend(&tensors, " ->");
    return absl::InternalError(
        absl::StrCat("oneDNN failed on op ", call.op, ": ", e.what(),
                     " (status ", static_cast<int>(e.status),
                     "); tensors (dtype[shape]{strides}):", tensors));
  }
}

}  // namespace mixrt::cpu
