#include "plugins/reference/reference_kernels.h"

#include "absl/strings/str_cat.h"

namespace mixrt::reference {

absl::Status RunKernel(const sdk::KernelCall& call) {
  switch (call.op) {
    case MIXRT_OP_FILL:
    case MIXRT_OP_COPY:
    case MIXRT_OP_ARANGE:
    case MIXRT_OP_RANDOM_UNIFORM:
    case MIXRT_OP_RANDOM_NORMAL:
      return RunCreation(call);
    case MIXRT_OP_BINARY:
    case MIXRT_OP_UNARY:
    case MIXRT_OP_UNARY_BACKWARD:
    case MIXRT_OP_COMPARE:
    case MIXRT_OP_WHERE:
      return RunPointwise(call);
    case MIXRT_OP_REDUCE:
      return RunReduce(call);
    case MIXRT_OP_MULTI_TENSOR_NORM:
      return RunMultiTensorNorm(call);
    case MIXRT_OP_MATMUL:
      return RunMatmul(call);
    case MIXRT_OP_SOFTMAX:
    case MIXRT_OP_LOG_SOFTMAX:
    case MIXRT_OP_SOFTMAX_BACKWARD:
    case MIXRT_OP_LOG_SOFTMAX_BACKWARD:
    case MIXRT_OP_LAYER_NORM:
    case MIXRT_OP_LAYER_NORM_BACKWARD:
      return RunSoftmaxNorm(call);
    case MIXRT_OP_CROSS_ENTROPY:
    case MIXRT_OP_CROSS_ENTROPY_BACKWARD:
      return RunLoss(call);
    case MIXRT_OP_NON_FINITE_CHECK_AND_UNSCALE:
    case MIXRT_OP_UPDATE_SCALE:
    case MIXRT_OP_SGD_STEP:
    case MIXRT_OP_MULTI_TENSOR_SGD_STEP:
    case MIXRT_OP_ADAMW_STEP:
      return RunOptimizer(call);
    case MIXRT_OP_CONV2D:
    case MIXRT_OP_CONV2D_BACKWARD_DATA:
    case MIXRT_OP_CONV2D_BACKWARD_WEIGHTS:
    case MIXRT_OP_POOL2D:
    case MIXRT_OP_POOL2D_BACKWARD:
      return RunConvPool(call);
    case MIXRT_OP_BATCH_NORM:
    case MIXRT_OP_BATCH_NORM_BACKWARD:
    case MIXRT_OP_EMBEDDING:
    case MIXRT_OP_EMBEDDING_BACKWARD:
      return RunBatchNormEmbedding(call);
    case MIXRT_OP_SCALED_DOT_PRODUCT_ATTENTION:
    case MIXRT_OP_SCALED_DOT_PRODUCT_ATTENTION_BACKWARD:
      return RunAttention(call);
    case MIXRT_OP_DROPOUT:
      return RunDropout(call);
    default:
      return absl::UnimplementedError(
          absl::StrCat("the reference plugin does not implement op ", call.op));
  }
}

}  // namespace mixrt::reference
