// cross_entropy forward and backward: one row per sample, in parallel.
#include <cmath>
#include <vector>

#include "absl/strings/str_cat.h"
#include "backends/cpu/cpu_kernels.h"
#include "backends/cpu/float_rows.h"
#include "backends/cpu/parallel.h"
#include "mixrt/status_macros.h"
#include "plugins/sdk/call_decoders.h"
#include "plugins/sdk/tensor_ref.h"

namespace mixrt::cpu {

absl::Status RunLoss(const sdk::KernelCall& call) {
  MIXRT_ASSIGN_OR_RETURN(sdk::CrossEntropyCall ce,
                         sdk::DecodeCrossEntropy(call));
  MIXRT_RETURN_IF_ERROR(sdk::CheckCrossEntropyTargets(ce));
  const bool backward = ce.backward;
  const MixrtCrossEntropyAttrs* attrs = ce.attrs;
  const sdk::TensorRef& logits = *ce.logits;
  const sdk::TensorRef& out = *ce.out;
  const int64_t rows = ce.rows(), classes = ce.classes();
  const auto* t = static_cast<const int64_t*>(ce.target->data());
  const int64_t ignore = attrs->ignore_index;
  const double eps = attrs->label_smoothing;
  std::vector<float> grad_loss;
  if (backward) {
    grad_loss.resize(rows);
    LoadRow(call.inputs[0].data(), call.inputs[0].dtype(), 0, rows,
            grad_loss.data());
  }
  ParallelFor(rows, GrainFor(classes), [&](int64_t begin, int64_t end) {
    std::vector<float> z(classes);
    for (int64_t r = begin; r < end; ++r) {
      LoadRow(logits.data(), logits.dtype(), r * classes, classes, z.data());
      float max = -INFINITY;
      for (float v : z) max = std::max(max, v);
      double sum = 0, all = 0;
      for (float v : z) {
        sum += std::exp(v - max);
        all += v;
      }
      // Log-probability input (nll_loss) is used as it is.
      const double lse = attrs->log_probs_input ? 0.0 : max + std::log(sum);
      const bool ignored = t[r] == ignore;
      if (!backward) {
        const double loss = ignored ? 0.0
                                    : -(1 - eps) * (z[t[r]] - lse) -
                                          eps / classes * (all - classes * lse);
        static_cast<float*>(out.data())[r] = static_cast<float>(loss);
        continue;
      }
      const double g = ignored ? 0.0 : grad_loss[r];
      for (int64_t c = 0; c < classes; ++c) {
        const double q = (c == t[r] ? 1 - eps : 0.0) + eps / classes;
        const double p = attrs->log_probs_input ? 0.0 : std::exp(z[c] - lse);
        z[c] = static_cast<float>(g * (p - q));
      }
      StoreRow(z.data(), classes, out.data(), out.dtype(), r * classes);
    }
  });
  return absl::OkStatus();
}

}  // namespace mixrt::cpu
