// cross_entropy (class indices, label smoothing, ignore_index) and backward.
#include <cmath>
#include <vector>

#include "absl/strings/str_cat.h"
#include "mixrt/status_macros.h"
#include "plugins/reference/reference_kernels.h"
#include "plugins/sdk/tensor_ref.h"

namespace mixrt::reference {

namespace {

sdk::Status CrossEntropy(const sdk::KernelCall& call) {
  const bool backward = call.op == MIXRT_OP_CROSS_ENTROPY_BACKWARD;
  MIXRT_RETURN_IF_ERROR(
      ExpectArity(call, backward ? 3 : 2, backward ? 3 : 2, 1));
  MIXRT_ASSIGN_OR_RETURN(auto attrs, call.GetAttrs<MixrtCrossEntropyAttrs>());
  const sdk::TensorRef& logits = call.inputs[backward ? 1 : 0];
  const sdk::TensorRef& target = call.inputs[backward ? 2 : 1];
  const sdk::TensorRef& out = call.outputs[0];
  if (logits.ndim() != 2 || target.ndim() != 1 ||
      target.dim(0) != logits.dim(0) || target.dtype() != MIXRT_DTYPE_I64) {
    return sdk::InvalidArgumentError(
        "cross_entropy takes logits [N, C] and i64 targets [N]");
  }
  const int64_t rows = logits.dim(0), classes = logits.dim(1);
  const double eps = attrs->label_smoothing;
  const int64_t ignore = attrs->ignore_index;
  std::vector<double> logp(classes);
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t t = target.LoadInt(r * target.stride(0));
    const bool ignored = t == ignore;
    if (!ignored && (t < 0 || t >= classes)) {
      return sdk::InvalidArgumentError(
          absl::StrCat("cross_entropy: target ", t, " at row ", r,
                       " is out of range [0, ", classes, ")"));
    }
    double max = -INFINITY;
    for (int64_t c = 0; c < classes; ++c) {
      logp[c] = logits.LoadFloat(r * logits.stride(0) + c * logits.stride(1));
      max = std::max(max, logp[c]);
    }
    double sum = 0;
    for (int64_t c = 0; c < classes; ++c) sum += std::exp(logp[c] - max);
    // With log-probability input (nll_loss) the row is used as it is.
    const double lse = attrs->log_probs_input ? 0.0 : max + std::log(sum);
    for (int64_t c = 0; c < classes; ++c) logp[c] -= lse;
    if (!backward) {
      double loss = 0;
      if (!ignored) {
        double all = 0;
        for (int64_t c = 0; c < classes; ++c) all += logp[c];
        loss = -(1 - eps) * logp[t] - eps / classes * all;
      }
      out.StoreFloat(r * out.stride(0), static_cast<float>(loss));
      continue;
    }
    const double g =
        ignored ? 0.0 : call.inputs[0].LoadFloat(r * call.inputs[0].stride(0));
    for (int64_t c = 0; c < classes; ++c) {
      const double q = (c == t ? 1 - eps : 0.0) + eps / classes;
      // d/dz of -sum q log_softmax(z) is softmax(z) - q; of -sum q z it is -q.
      const double p = attrs->log_probs_input ? 0.0 : std::exp(logp[c]);
      out.StoreFloat(r * out.stride(0) + c * out.stride(1),
                     static_cast<float>(g * (p - q)));
    }
  }
  return sdk::OkStatus();
}

}  // namespace

std::vector<sdk::OpTable::Row> LossOps() {
  return {
      {MIXRT_OP_CROSS_ENTROPY, CrossEntropy},
      {MIXRT_OP_CROSS_ENTROPY_BACKWARD, CrossEntropy},
  };
}

}  // namespace mixrt::reference
