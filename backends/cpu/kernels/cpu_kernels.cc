#include "backends/cpu/kernels/cpu_kernels.h"

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

namespace mixrt::cpu {
namespace {

absl::Status RunDense(const sdk::KernelCall& call,
                      absl::Status (*kernel)(const sdk::KernelCall&)) {
  DenseCall dense(call);
  absl::Status status = kernel(dense.call());
  if (status.ok()) dense.Finish();
  return status;
}

absl::Status Dispatch(const sdk::KernelCall& call) {
  switch (call.op) {
    case MIXRT_OP_FILL:
    case MIXRT_OP_COPY:
    case MIXRT_OP_ARANGE:
    case MIXRT_OP_RANDOM_UNIFORM:
    case MIXRT_OP_RANDOM_NORMAL:
      return RunCreation(call);
    case MIXRT_OP_MATMUL:
      return RunMatmul(call);
    case MIXRT_OP_BINARY:
    case MIXRT_OP_UNARY:
    case MIXRT_OP_UNARY_BACKWARD:
    case MIXRT_OP_COMPARE:
    case MIXRT_OP_WHERE:
      return RunDense(call, RunPointwise);
    case MIXRT_OP_REDUCE:
      return RunDense(call, RunReduce);
    case MIXRT_OP_MULTI_TENSOR_NORM:
      return RunDense(call, RunMultiTensorNorm);
    case MIXRT_OP_SOFTMAX:
    case MIXRT_OP_LOG_SOFTMAX:
    case MIXRT_OP_SOFTMAX_BACKWARD:
    case MIXRT_OP_LOG_SOFTMAX_BACKWARD:
    case MIXRT_OP_LAYER_NORM:
    case MIXRT_OP_LAYER_NORM_BACKWARD:
      return RunDense(call, RunSoftmaxNorm);
    case MIXRT_OP_CROSS_ENTROPY:
    case MIXRT_OP_CROSS_ENTROPY_BACKWARD:
      return RunDense(call, RunLoss);
    case MIXRT_OP_NON_FINITE_CHECK_AND_UNSCALE:
    case MIXRT_OP_UPDATE_SCALE:
    case MIXRT_OP_SGD_STEP:
    case MIXRT_OP_MULTI_TENSOR_SGD_STEP:
    case MIXRT_OP_ADAMW_STEP:
      return RunDense(call, RunOptimizer);
    case MIXRT_OP_CONV2D:
    case MIXRT_OP_CONV2D_BACKWARD_DATA:
    case MIXRT_OP_CONV2D_BACKWARD_WEIGHTS:
      return RunConv(call);
    case MIXRT_OP_POOL2D:
    case MIXRT_OP_POOL2D_BACKWARD:
      return RunDense(call, RunPool);
    case MIXRT_OP_SCALED_DOT_PRODUCT_ATTENTION:
    case MIXRT_OP_SCALED_DOT_PRODUCT_ATTENTION_BACKWARD:
      return RunAttention(call);  // The mask may keep broadcast strides.
    case MIXRT_OP_DROPOUT:
      return RunDense(call, RunDropout);
    case MIXRT_OP_BATCH_NORM:
    case MIXRT_OP_BATCH_NORM_BACKWARD:
    case MIXRT_OP_EMBEDDING:
    case MIXRT_OP_EMBEDDING_BACKWARD:
      return RunDense(call, RunBatchNormEmbedding);
    default:
      return absl::UnimplementedError(
          absl::StrCat("the cpu plugin does not implement op ", call.op));
  }
}

}  // namespace

absl::Status RunKernel(const sdk::KernelCall& call) {
  try {
    return Dispatch(call);
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
