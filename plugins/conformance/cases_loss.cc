#include "absl/strings/str_cat.h"
#include "core/kernels/loss.h"
#include "plugins/conformance/case_util.h"

namespace mixrt::conformance {

using namespace ::mixrt::kernels;  // The ops the cases run.

void AddLossCases(std::vector<Case>* cases) {
  for (DType dtype : kFloatTypes) {
    for (double smoothing : {0.0, 0.1}) {
      const std::vector<InputSpec> specs = {
          {{513, 10}, dtype, Values::kNormal},
          {{513}, DType::kI64, Values::kLabels, false, 10}};
      const std::string base = absl::StrCat("cross_entropy/smoothing",
                                            smoothing, "/", DTypeName(dtype));
      CrossEntropyOptions o;
      o.label_smoothing = smoothing;
      o.ignore_index = 3;  // Some labels are 3: exercises the ignore path.
      o.reduction = Reduction::kNone;
      cases->push_back(
          {base, MIXRT_OP_CLASS_LOSS, dtype, [=](const Devices& d) {
             CompareOp(
                 d, specs,
                 [=](const std::vector<Tensor>& in) {
                   return One(cross_entropy(in[0], in[1], o));
                 },
                 Fixed(TranscendentalTolerance(DType::kF32)), kSeed);
           }});
      std::vector<InputSpec> bspecs = specs;
      bspecs.push_back({{513}, DType::kF32});
      cases->push_back(
          {absl::StrCat(base, "/backward"), MIXRT_OP_CLASS_LOSS, dtype,
           [=](const Devices& d) {
             CompareOp(
                 d, bspecs,
                 [=](const std::vector<Tensor>& in) {
                   return One(cross_entropy_backward(in[2], in[0], in[1], o));
                 },
                 [=](int, const std::vector<std::vector<double>>&) {
                   Tolerance t = TranscendentalTolerance(dtype);
                   t.atol = 4 * UnitRoundoff(dtype);
                   return t;
                 },
                 kSeed);
           }});
    }
  }
}

}  // namespace mixrt::conformance
