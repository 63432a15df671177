#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "core/kernels/batch_norm.h"
#include "core/kernels/embedding.h"
#include "core/tensor/factories.h"
#include "plugins/conformance/case_util.h"

namespace mixrt::conformance {

using namespace ::mixrt::kernels;  // The ops the cases run.

void AddBatchNormEmbeddingCases(std::vector<Case>* cases) {
  for (DType dtype : kFloatTypes) {
    for (bool training : {true, false}) {
      const std::string base = absl::StrCat(
          "batch_norm/", training ? "train" : "eval", "/", DTypeName(dtype));
      const std::vector<InputSpec> specs = {
          {{513, 6, 3}, dtype}, {{6}, dtype}, {{6}, dtype}};
      auto run = [=](const std::vector<Tensor>& in, bool backward) -> Outputs {
        const Device& dev = in[0].device();
        auto rm = full({6}, 0.25, DType::kF32, dev);
        auto rv = full({6}, 2.0, DType::kF32, dev);
        if (!rm.ok() || !rv.ok()) return absl::InternalError("setup");
        auto out = batch_norm(in[0], in[1], in[2], *rm, *rv, training);
        if (!out.ok()) return out.status();
        if (!backward) {
          return std::vector<Tensor>{out->y, out->save_mean, out->save_invstd,
                                     *rm, *rv};
        }
        auto g = batch_norm_backward(in[0], in[0], in[1], *out, training);
        if (!g.ok()) return g.status();
        return std::vector<Tensor>{g->grad_x, g->grad_weight, g->grad_bias};
      };
      Tolerance tol = TranscendentalTolerance(dtype);
      tol.atol = 8 * UnitRoundoff(dtype) + 1e-5;
      cases->push_back(
          {base, MIXRT_OP_CLASS_NORMALIZATION, dtype, [=](const Devices& d) {
             CompareOp(
                 d, specs,
                 [=](const std::vector<Tensor>& in) { return run(in, false); },
                 Fixed(tol), kSeed);
           }});
      Tolerance btol = tol;
      btol.atol = 64 * UnitRoundoff(dtype) + 1e-4;  // Sums over 1539 values.
      cases->push_back(
          {absl::StrCat(base, "/backward"), MIXRT_OP_CLASS_NORMALIZATION, dtype,
           [=](const Devices& d) {
             CompareOp(
                 d, specs,
                 [=](const std::vector<Tensor>& in) { return run(in, true); },
                 Fixed(btol), kSeed);
           }});
    }
    const std::vector<InputSpec> emb = {
        {{50, 8}, dtype}, {{3, 7}, DType::kI64, Values::kLabels, false, 50}};
    cases->push_back(
        {absl::StrCat("embedding/forward_and_backward/", DTypeName(dtype)),
         MIXRT_OP_CLASS_EMBEDDING, dtype, [=](const Devices& d) {
           CompareOp(
               d, emb,
               [](const std::vector<Tensor>& in) -> Outputs {
                 auto rows = embedding(in[0], in[1]);
                 if (!rows.ok()) return rows.status();
                 auto g = embedding_backward(*rows, in[1], 50, /*padding=*/7);
                 if (!g.ok()) return g.status();
                 return std::vector<Tensor>{*rows, *g};
               },
               Fixed(ExactTolerance(dtype)), kSeed);
         }});
  }
}

}  // namespace mixrt::conformance
