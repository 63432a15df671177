// cross_entropy forward and backward: one row per sample, in parallel.
#include <cmath>
#include <vector>

#include "absl/strings/str_cat.h"
#include "backends/cpu/cpu_kernels.h"
#include "backends/cpu/float_rows.h"
#include "backends/cpu/parallel.h"
#include "backends/cpu/softmax_rows.h"
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
  // Exponentials by the softmax's vectorized rows (a scalar exp per class
  // was a quarter of a small classifier's train step); sums and the loss
  // itself in double.
  const SoftmaxRowKernels& k = SoftmaxRows();
  const bool log_probs = attrs->log_probs_input;
  ParallelFor(rows, GrainFor(4 * classes), [&](int64_t begin, int64_t end) {
    std::vector<float> z(classes), e(classes);
    for (int64_t r = begin; r < end; ++r) {
      LoadRow(logits.data(), logits.dtype(), r * classes, classes, z.data());
      const float max = k.row_max(z.data(), classes);
      // Log-probability input (nll_loss) is used as it is.
      double lse = 0;
      if (!log_probs) {
        lse = max + std::log(static_cast<double>(
                        k.exp_row_f32(z.data(), classes, max, 1.0f, e.data())));
      }
      const bool ignored = t[r] == ignore;
      if (!backward) {
        double all = 0;
        for (float v : z) all += v;
        const double loss = ignored ? 0.0
                                    : -(1 - eps) * (z[t[r]] - lse) -
                                          eps / classes * (all - classes * lse);
        static_cast<float*>(out.data())[r] = static_cast<float>(loss);
        continue;
      }
      if (!log_probs) {
        k.exp_row_f32(z.data(), classes, static_cast<float>(lse), 1.0f, e.data());
      }
      const float g = ignored ? 0.0f : grad_loss[r];
      const float off = static_cast<float>(eps / classes);
      for (int64_t c = 0; c < classes; ++c) {
        z[c] = g * ((log_probs ? 0.0f : e[c]) - off);
      }
      if (!ignored) {
        z[t[r]] = static_cast<float>(
            g * ((log_probs ? 0.0 : e[t[r]]) - (1 - eps) - eps / classes));
      }
      StoreRow(z.data(), classes, out.data(), out.dtype(), r * classes);
    }
  });
  return absl::OkStatus();
}

}  // namespace mixrt::cpu
