/* The name of each MixrtOp, for error messages on both sides of the ABI, so
 * a refused call says "matmul", not "op 11". C, like plugin_api.h.
 *
 *   printf("%s failed\n", MixrtOpName(MIXRT_OP_MATMUL));  // "matmul failed"
 */
#ifndef MIXRT_OP_NAMES_H_
#define MIXRT_OP_NAMES_H_

#include "mixrt/plugin_api.h"

/* A static string; "unknown op" for values this header does not know (a
 * newer host's op reaching an older plugin). */
/* clang-format off */
static inline const char* MixrtOpName(MixrtOp op) {
  switch (op) {
    case MIXRT_OP_FILL: return "fill";
    case MIXRT_OP_COPY: return "copy";
    case MIXRT_OP_ARANGE: return "arange";
    case MIXRT_OP_RANDOM_UNIFORM: return "random_uniform";
    case MIXRT_OP_RANDOM_NORMAL: return "random_normal";
    case MIXRT_OP_BINARY: return "binary";
    case MIXRT_OP_UNARY: return "unary";
    case MIXRT_OP_UNARY_BACKWARD: return "unary_backward";
    case MIXRT_OP_COMPARE: return "compare";
    case MIXRT_OP_WHERE: return "where";
    case MIXRT_OP_REDUCE: return "reduce";
    case MIXRT_OP_MATMUL: return "matmul";
    case MIXRT_OP_SOFTMAX: return "softmax";
    case MIXRT_OP_LOG_SOFTMAX: return "log_softmax";
    case MIXRT_OP_SOFTMAX_BACKWARD: return "softmax_backward";
    case MIXRT_OP_LOG_SOFTMAX_BACKWARD: return "log_softmax_backward";
    case MIXRT_OP_LAYER_NORM: return "layer_norm";
    case MIXRT_OP_LAYER_NORM_BACKWARD: return "layer_norm_backward";
    case MIXRT_OP_CROSS_ENTROPY: return "cross_entropy";
    case MIXRT_OP_CROSS_ENTROPY_BACKWARD: return "cross_entropy_backward";
    case MIXRT_OP_NON_FINITE_CHECK_AND_UNSCALE:
      return "non_finite_check_and_unscale";
    case MIXRT_OP_UPDATE_SCALE: return "update_scale";
    case MIXRT_OP_SGD_STEP: return "sgd_step";
    case MIXRT_OP_ADAMW_STEP: return "adamw_step";
    case MIXRT_OP_CONV2D: return "conv2d";
    case MIXRT_OP_CONV2D_BACKWARD_DATA: return "conv2d_backward_data";
    case MIXRT_OP_CONV2D_BACKWARD_WEIGHTS: return "conv2d_backward_weights";
    case MIXRT_OP_POOL2D: return "pool2d";
    case MIXRT_OP_POOL2D_BACKWARD: return "pool2d_backward";
    case MIXRT_OP_BATCH_NORM: return "batch_norm";
    case MIXRT_OP_BATCH_NORM_BACKWARD: return "batch_norm_backward";
    case MIXRT_OP_EMBEDDING: return "embedding";
    case MIXRT_OP_EMBEDDING_BACKWARD: return "embedding_backward";
    case MIXRT_OP_MULTI_TENSOR_NORM: return "multi_tensor_norm";
    case MIXRT_OP_SCALED_DOT_PRODUCT_ATTENTION:
      return "scaled_dot_product_attention";
    case MIXRT_OP_SCALED_DOT_PRODUCT_ATTENTION_BACKWARD:
      return "scaled_dot_product_attention_backward";
    case MIXRT_OP_DROPOUT: return "dropout";
    case MIXRT_OP_MULTI_TENSOR_SGD_STEP: return "multi_tensor_sgd_step";
    default: return "unknown op";
  }
}

/* The name of an op's variant (the `variant` of the per-op support query:
 * see MixrtDevice_GetOpSupport_Args), e.g. "sub" for binary kind 1; "" for
 * ops without variants or unknown values. */
static inline const char* MixrtOpVariantName(MixrtOp op, uint32_t variant) {
  static const char* const kBinary[] = {"add", "sub", "mul", "div",
                                        "pow", "maximum", "minimum"};
  static const char* const kUnary[] = {
      "neg",  "abs", "relu",  "leaky_relu", "gelu", "gelu_tanh",
      "silu", "sigmoid", "tanh", "exp", "log", "log1p",
      "sqrt", "rsqrt", "clamp", "pow_scalar", "scale"};
  static const char* const kCompare[] = {"eq", "ne", "lt", "le", "gt", "ge"};
  static const char* const kReduce[] = {"sum", "mean", "max",
                                        "min", "abs_max", "var"};
  static const char* const kPool[] = {"max", "avg"};
  static const char* const kActivation[] = {"", "relu", "gelu", "gelu_tanh"};
#define MIXRT_VARIANT_(table) \
  (variant < sizeof(table) / sizeof(table[0]) ? table[variant] : "")
  switch (op) {
    case MIXRT_OP_BINARY: return MIXRT_VARIANT_(kBinary);
    case MIXRT_OP_UNARY:
    case MIXRT_OP_UNARY_BACKWARD: return MIXRT_VARIANT_(kUnary);
    case MIXRT_OP_COMPARE: return MIXRT_VARIANT_(kCompare);
    case MIXRT_OP_REDUCE: return MIXRT_VARIANT_(kReduce);
    case MIXRT_OP_POOL2D:
    case MIXRT_OP_POOL2D_BACKWARD: return MIXRT_VARIANT_(kPool);
    case MIXRT_OP_MATMUL:
    case MIXRT_OP_CONV2D: return MIXRT_VARIANT_(kActivation);
    default: return "";
  }
#undef MIXRT_VARIANT_
}

/* clang-format on */

#endif /* MIXRT_OP_NAMES_H_ */
