// A product (prepared_matmul.h's MatmulShape) in and out of the companion's
// plain C form (companion_abi.h). Inline, because each side compiles it
// against its own oneDNN: the plugin against 2.6.3, the companion against
// 3.x; both spell the algorithms below the same way.
#ifndef MIXRT_BACKENDS_CPU_ONEDNN3_COMPANION_PRODUCT_H_
#define MIXRT_BACKENDS_CPU_ONEDNN3_COMPANION_PRODUCT_H_

#include <utility>

#include "backends/cpu/onednn/prepared_matmul.h"
#include "backends/cpu/onednn3/companion_abi.h"

namespace mixrt::cpu {

inline constexpr std::pair<dnnl::algorithm, MixrtOneDnn3Activation>
    kCompanionActivations[] = {
        {dnnl::algorithm::eltwise_relu, MIXRT_ONEDNN3_RELU},
        {dnnl::algorithm::eltwise_gelu_erf, MIXRT_ONEDNN3_GELU_ERF},
        {dnnl::algorithm::eltwise_gelu_tanh, MIXRT_ONEDNN3_GELU_TANH},
        {dnnl::algorithm::eltwise_swish, MIXRT_ONEDNN3_SWISH},
        {dnnl::algorithm::eltwise_logistic, MIXRT_ONEDNN3_LOGISTIC},
        {dnnl::algorithm::eltwise_tanh, MIXRT_ONEDNN3_TANH},
        {dnnl::algorithm::eltwise_linear, MIXRT_ONEDNN3_LINEAR},
};

inline bool ToCompanionOperand(const MatmulOperand& from,
                               MixrtOneDnn3Operand* to) {
  if (from.dims.size() > MIXRT_CPU_ONEDNN3_MAX_RANK ||
      from.strides.size() != from.dims.size()) {
    return false;
  }
  to->dtype = from.dtype;
  to->rank = static_cast<int32_t>(from.dims.size());
  for (size_t i = 0; i < from.dims.size(); ++i) {
    to->dims[i] = from.dims[i];
    to->strides[i] = from.strides[i];
  }
  return true;
}

// False when the companion cannot take the product: weights packed for
// oneDNN 2.x, a binary post-op (a second tensor), an activation outside
// the table, or more of them than the form holds.
inline bool ToCompanionProduct(const MatmulShape& from,
                               MixrtOneDnn3Product* to) {
  if (from.packed_b || from.post_ops.size() > MIXRT_CPU_ONEDNN3_MAX_ELTWISE) {
    return false;
  }
  *to = MixrtOneDnn3Product{};
  if (!ToCompanionOperand(from.a, &to->a) ||
      !ToCompanionOperand(from.b, &to->b) ||
      !ToCompanionOperand(from.c, &to->c) ||
      !ToCompanionOperand(from.bias, &to->bias)) {
    return false;
  }
  to->sum_beta = from.sum_beta;
  for (const MatmulPostOp& op : from.post_ops) {
    if (op.binary) return false;
    MixrtOneDnn3Eltwise& e = to->eltwise[to->num_eltwise++];
    e.activation = 0;
    for (const auto& [algorithm, activation] : kCompanionActivations) {
      if (algorithm == op.algorithm) e.activation = activation;
    }
    if (e.activation == 0) return false;
    e.alpha = op.alpha;
    e.beta = op.beta;
  }
  return true;
}

inline MatmulOperand FromCompanionOperand(const MixrtOneDnn3Operand& from) {
  MatmulOperand to;
  to.dtype = static_cast<MixrtDtype>(from.dtype);
  to.dims.assign(from.dims, from.dims + from.rank);
  to.strides.assign(from.strides, from.strides + from.rank);
  return to;
}

// False when the form is not one ToCompanionProduct writes (a bad rank or
// activation).
inline bool FromCompanionProduct(const MixrtOneDnn3Product& from,
                                 MatmulShape* to) {
  for (const MixrtOneDnn3Operand* o : {&from.a, &from.b, &from.c, &from.bias}) {
    if (o->rank < 0 || o->rank > MIXRT_CPU_ONEDNN3_MAX_RANK) return false;
  }
  if (from.num_eltwise < 0 || from.num_eltwise > MIXRT_CPU_ONEDNN3_MAX_ELTWISE)
    return false;
  *to = MatmulShape{};
  to->a = FromCompanionOperand(from.a);
  to->b = FromCompanionOperand(from.b);
  to->c = FromCompanionOperand(from.c);
  to->bias = FromCompanionOperand(from.bias);
  to->sum_beta = from.sum_beta;
  for (int i = 0; i < from.num_eltwise; ++i) {
    MatmulPostOp op;
    for (const auto& [algorithm, activation] : kCompanionActivations) {
      if (activation == from.eltwise[i].activation) op.algorithm = algorithm;
    }
    if (op.algorithm == dnnl::algorithm::undef) return false;
    op.alpha = from.eltwise[i].alpha;
    op.beta = from.eltwise[i].beta;
    to->post_ops.push_back(op);
  }
  return true;
}

}  // namespace mixrt::cpu

#endif  // MIXRT_BACKENDS_CPU_ONEDNN3_COMPANION_PRODUCT_H_
