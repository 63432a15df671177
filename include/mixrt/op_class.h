/* The capability class of each MixrtOp (the table in plugin_api.h above
 * MixrtDevice_GetCapability_Args), for plugins that answer the per-op
 * support query from their class matrix, and for the host, which gates a
 * 1.0 plugin's launches by it. C, like plugin_api.h. */
#ifndef MIXRT_OP_CLASS_H_
#define MIXRT_OP_CLASS_H_

#include "mixrt/plugin_api.h"

/* MIXRT_OP_CLASS_COUNT for values this header does not know. */
/* clang-format off */
static inline MixrtOpClass MixrtOpClassOf(MixrtOp op) {
  switch (op) {
    case MIXRT_OP_FILL: case MIXRT_OP_COPY: case MIXRT_OP_ARANGE:
    case MIXRT_OP_RANDOM_UNIFORM: case MIXRT_OP_RANDOM_NORMAL:
      return MIXRT_OP_CLASS_CAST;
    case MIXRT_OP_BINARY: case MIXRT_OP_UNARY: case MIXRT_OP_UNARY_BACKWARD:
    case MIXRT_OP_COMPARE: case MIXRT_OP_WHERE: case MIXRT_OP_DROPOUT:
      return MIXRT_OP_CLASS_ELEMENTWISE;
    case MIXRT_OP_REDUCE: case MIXRT_OP_MULTI_TENSOR_NORM:
      return MIXRT_OP_CLASS_REDUCTION;
    case MIXRT_OP_MATMUL: case MIXRT_OP_SCALED_DOT_PRODUCT_ATTENTION:
    case MIXRT_OP_SCALED_DOT_PRODUCT_ATTENTION_BACKWARD:
      return MIXRT_OP_CLASS_MATMUL;
    case MIXRT_OP_SOFTMAX: case MIXRT_OP_LOG_SOFTMAX:
    case MIXRT_OP_SOFTMAX_BACKWARD: case MIXRT_OP_LOG_SOFTMAX_BACKWARD:
      return MIXRT_OP_CLASS_SOFTMAX;
    case MIXRT_OP_LAYER_NORM: case MIXRT_OP_LAYER_NORM_BACKWARD:
    case MIXRT_OP_BATCH_NORM: case MIXRT_OP_BATCH_NORM_BACKWARD:
      return MIXRT_OP_CLASS_NORMALIZATION;
    case MIXRT_OP_CROSS_ENTROPY: case MIXRT_OP_CROSS_ENTROPY_BACKWARD:
      return MIXRT_OP_CLASS_LOSS;
    case MIXRT_OP_NON_FINITE_CHECK_AND_UNSCALE: case MIXRT_OP_UPDATE_SCALE:
    case MIXRT_OP_SGD_STEP: case MIXRT_OP_ADAMW_STEP:
    case MIXRT_OP_MULTI_TENSOR_SGD_STEP:
      return MIXRT_OP_CLASS_OPTIMIZER;
    case MIXRT_OP_CONV2D: case MIXRT_OP_CONV2D_BACKWARD_DATA:
    case MIXRT_OP_CONV2D_BACKWARD_WEIGHTS:
      return MIXRT_OP_CLASS_CONV;
    case MIXRT_OP_POOL2D: case MIXRT_OP_POOL2D_BACKWARD:
      return MIXRT_OP_CLASS_POOL;
    case MIXRT_OP_EMBEDDING: case MIXRT_OP_EMBEDDING_BACKWARD:
      return MIXRT_OP_CLASS_EMBEDDING;
    default:
      return MIXRT_OP_CLASS_COUNT;
  }
}
/* clang-format on */

#endif /* MIXRT_OP_CLASS_H_ */
