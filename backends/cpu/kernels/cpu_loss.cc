// cross_entropy forward and backward: one row per sample, in parallel.
#include "backends/cpu/kernels/cpu_loss.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "backends/cpu/kernels/float_rows.h"
#include "backends/cpu/kernels/parallel.h"
#include "backends/cpu/kernels/softmax_rows.h"
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
  // Exponentials by the softmax's vectorized exp over blocks of rows at
  // once, each row shifted first (a scalar exp per class was a quarter of a
  // small classifier's train step; one call per 10-class row still cost
  // ~75 ns of latency); sums and the loss itself in double.
  const SoftmaxRowKernels& k = SoftmaxRows();
  const bool log_probs = attrs->log_probs_input;
  const int64_t block =
      std::max<int64_t>(1, 4096 / std::max<int64_t>(classes, 1));
  ParallelFor(rows, GrainFor(4 * classes), [&](int64_t begin, int64_t end) {
    // Kept per thread (four allocations were a fifth of a 32 x 10 loss).
    thread_local std::vector<float> z, d, e;
    thread_local std::vector<double> lse, sums;
    for (int64_t r0 = begin; r0 < end; r0 += block) {
      const int64_t n = std::min(block, end - r0);
      z.resize(n * classes);
      d.resize(n * classes);
      e.resize(n * classes);
      lse.assign(n, 0.0);
      sums.assign(n, 0.0);
      LoadRow(logits.data(), logits.dtype(), r0 * classes, n * classes,
              z.data());
      // Log-probability input (nll_loss) is used as it is.
      if (!log_probs) {
        for (int64_t i = 0; i < n; ++i) {
          const float* zi = z.data() + i * classes;
          const float max = k.row_max(zi, classes);
          for (int64_t c = 0; c < classes; ++c)
            d[i * classes + c] = zi[c] - max;
          lse[i] = max;
        }
        k.exp_row_f32(d.data(), n * classes, 0.0f, 1.0f, e.data());
        for (int64_t i = 0; i < n; ++i) {
          double sum = 0;
          for (int64_t c = 0; c < classes; ++c) sum += e[i * classes + c];
          sums[i] = sum;
          if (!backward) lse[i] += std::log(sum);
        }
      }
      if (!backward) {
        for (int64_t i = 0; i < n; ++i) {
          const int64_t r = r0 + i;
          const float* zi = z.data() + i * classes;
          double all = 0;
          for (int64_t c = 0; c < classes; ++c) all += zi[c];
          const double loss =
              t[r] == ignore ? 0.0
                             : -(1 - eps) * (zi[t[r]] - lse[i]) -
                                   eps / classes * (all - classes * lse[i]);
          static_cast<float*>(out.data())[r] = static_cast<float>(loss);
        }
        continue;
      }
      if (!log_probs) {
        // Softmax as PyTorch computes it, exp(z - max) / sum: the
        // exponentials above once more, not a second pass of exp(z - lse).
        for (int64_t i = 0; i < n; ++i) {
          const float inv = static_cast<float>(1.0 / sums[i]);
          for (int64_t c = 0; c < classes; ++c) e[i * classes + c] *= inv;
        }
      }
      const float off = static_cast<float>(eps / classes);
      for (int64_t i = 0; i < n; ++i) {
        const int64_t r = r0 + i;
        const bool ignored = t[r] == ignore;
        const float g = ignored ? 0.0f : grad_loss[r];
        float* gi = z.data() + i * classes;
        const float* p = e.data() + i * classes;
        for (int64_t c = 0; c < classes; ++c) {
          gi[c] = g * ((log_probs ? 0.0f : p[c]) - off);
        }
        if (!ignored) {
          gi[t[r]] = static_cast<float>(
              g * ((log_probs ? 0.0 : p[t[r]]) - (1 - eps) - eps / classes));
        }
      }
      StoreRow(z.data(), n * classes, out.data(), out.dtype(), r0 * classes);
    }
  });
  return absl::OkStatus();
}

}  // namespace mixrt::cpu
