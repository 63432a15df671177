#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "core/kernels/loss.h"
#include "core/tensor/factories.h"
#include "plugins/conformance/case_util.h"

namespace mixrt::conformance {

using namespace ::mixrt::kernels;  // The ops the cases run.

void AddRegressionLossCases(std::vector<Case>* cases) {
  using LossFn =
      absl::StatusOr<Tensor> (*)(const Tensor&, const Tensor&, Reduction);
  using GradFn = absl::StatusOr<Tensor> (*)(const Tensor&, const Tensor&,
                                            const Tensor&, Reduction);
  struct L {
    const char* name;
    LossFn loss;
    GradFn grad;
  };
  const L losses[] = {
      {"mse", mse_loss, mse_loss_backward},
      {"l1", l1_loss, l1_loss_backward},
      {"smooth_l1",
       [](const Tensor& a, const Tensor& b, Reduction r) {
         return smooth_l1_loss(a, b, r);
       },
       [](const Tensor& g, const Tensor& a, const Tensor& b, Reduction r) {
         return smooth_l1_loss_backward(g, a, b, r);
       }},
      {"bce_with_logits", binary_cross_entropy_with_logits,
       binary_cross_entropy_with_logits_backward},
  };
  for (DType dtype : kFloatTypes) {
    for (const L& l : losses) {
      cases->push_back(
          {absl::StrCat("loss/", l.name, "/", DTypeName(dtype)),
           MIXRT_OP_CLASS_LOSS, dtype, [=](const Devices& d) {
             CompareOp(
                 d, {{{513, 5}, dtype}, {{513, 5}, dtype, Values::kPositive}},
                 [=](const std::vector<Tensor>& in) -> Outputs {
                   auto none = l.loss(in[0], in[1], Reduction::kNone);
                   auto total = l.loss(in[0], in[1], Reduction::kSum);
                   auto one = full({}, 1.0, in[0].dtype(), in[0].device());
                   if (!none.ok() || !total.ok() || !one.ok()) {
                     return absl::InternalError("loss failed");
                   }
                   auto g = l.grad(*one, in[0], in[1], Reduction::kMean);
                   if (!g.ok()) return g.status();
                   return std::vector<Tensor>{*none, *total, *g};
                 },
                 [=](int index, const std::vector<std::vector<double>>&) {
                   // Terms of size up to ~16 (x y, log1p) may cancel: an
                   // absolute error on that scale, then / 2565 for the mean
                   // gradient; the sum adds 2565 rounded terms.
                   Tolerance t = TranscendentalTolerance(dtype);
                   const double term = 64 * UnitRoundoff(dtype);
                   t.atol = index == 0   ? term
                            : index == 1 ? 2565 * term
                                         : term / 2565;
                   return t;
                 },
                 kSeed);
           }});
    }
    cases->push_back({absl::StrCat("loss/nll/", DTypeName(dtype)),
                      MIXRT_OP_CLASS_LOSS, dtype, [=](const Devices& d) {
                        CompareOp(
                            d,
                            {{{513, 10}, dtype},
                             {{513}, DType::kI64, Values::kLabels, false, 10}},
                            [](const std::vector<Tensor>& in) -> Outputs {
                              CrossEntropyOptions o;
                              o.reduction = Reduction::kNone;
                              o.label_smoothing = 0.05;
                              auto loss = nll_loss(in[0], in[1], o);
                              auto g =
                                  full({513}, 1.0, DType::kF32, in[0].device());
                              if (!loss.ok() || !g.ok())
                                return absl::InternalError("nll");
                              auto grad =
                                  nll_loss_backward(*g, in[0], in[1], o);
                              if (!grad.ok()) return grad.status();
                              return std::vector<Tensor>{*loss, *grad};
                            },
                            Fixed(TranscendentalTolerance(dtype)), kSeed);
                      }});
  }
}

}  // namespace mixrt::conformance
