#include "absl/strings/str_cat.h"
#include "core/kernels/layer_norm.h"
#include "core/kernels/pointwise.h"
#include "core/kernels/softmax.h"
#include "plugins/conformance/case_util.h"

namespace mixrt::conformance {

using namespace ::mixrt::kernels;  // The ops the cases run.

void AddSoftmaxNormCases(std::vector<Case>* cases) {
  for (DType dtype : kFloatTypes) {
    for (int dim : {-1, 0}) {
      for (bool log : {false, true}) {
        const std::string base =
            absl::StrCat(log ? "log_softmax" : "softmax", "/dim", dim, "/",
                         DTypeName(dtype));
        const InputSpec x{{513, 10}, dtype};
        // log_softmax = x - max - log(sum): float rounding of each term
        // (|terms| <= ~8 here) lands on the result absolutely.
        Tolerance tol = TranscendentalTolerance(dtype);
        if (log) tol.atol = 8 * 16 * UnitRoundoff(DType::kF32);
        cases->push_back(
            {base, MIXRT_OP_CLASS_SOFTMAX, dtype, [=](const Devices& d) {
               CompareOp(
                   d, {x},
                   [=](const std::vector<Tensor>& in) {
                     return One(log ? log_softmax(in[0], dim)
                                    : softmax(in[0], dim));
                   },
                   Fixed(tol), kSeed);
             }});
        cases->push_back(
            {absl::StrCat(base, "/backward"), MIXRT_OP_CLASS_SOFTMAX, dtype,
             [=](const Devices& d) {
               CompareOp(
                   d, {x, {{513, 10}, dtype}},
                   [=](const std::vector<Tensor>& in) -> Outputs {
                     // Both devices get the reference's forward output, so
                     // only the backward kernels are compared.
                     auto x_ref = in[0].to(d.reference);
                     if (!x_ref.ok()) return x_ref.status();
                     auto y =
                         log ? log_softmax(*x_ref, dim) : softmax(*x_ref, dim);
                     if (!y.ok()) return y.status();
                     auto y_here = y->to(in[0].device());
                     if (!y_here.ok()) return y_here.status();
                     return One(log ? log_softmax_backward(in[1], *y_here, dim)
                                    : softmax_backward(in[1], *y_here, dim));
                   },
                   [=](int, const std::vector<std::vector<double>>& in) {
                     // A row sum of n gradient terms in f32.
                     Tolerance t = TranscendentalTolerance(dtype);
                     const double n = dim == 0 ? 513 : 10;
                     t.atol = 4 * n * UnitRoundoff(DType::kF32) * 4 +
                              4 * UnitRoundoff(dtype);
                     return t;
                   },
                   kSeed);
             }});
      }
    }
    for (bool affine : {true, false}) {
      std::vector<InputSpec> specs = {{{513, 64}, dtype}};
      if (affine) {
        specs.push_back({{64}, dtype});
        specs.push_back({{64}, dtype});
      }
      const std::string base = absl::StrCat(
          "layer_norm/", affine ? "affine" : "plain", "/", DTypeName(dtype));
      cases->push_back(
          {base, MIXRT_OP_CLASS_NORMALIZATION, dtype, [=](const Devices& d) {
             CompareOp(
                 d, specs,
                 [=](const std::vector<Tensor>& in) -> Outputs {
                   auto o = layer_norm(in[0], 1, affine ? in[1] : Tensor(),
                                       affine ? in[2] : Tensor());
                   if (!o.ok()) return o.status();
                   return std::vector<Tensor>{o->y, o->mean, o->rstd};
                 },
                 [=](int, const std::vector<std::vector<double>>&) {
                   Tolerance t = TranscendentalTolerance(dtype);
                   t.rtol += 64 * UnitRoundoff(DType::kF32);
                   t.atol = 4 * UnitRoundoff(dtype);
                   return t;
                 },
                 kSeed);
           }});
      std::vector<InputSpec> bspecs = specs;
      bspecs.push_back({{513, 64}, dtype});
      cases->push_back(
          {absl::StrCat(base, "/backward"), MIXRT_OP_CLASS_NORMALIZATION, dtype,
           [=](const Devices& d) {
             CompareOp(
                 d, bspecs,
                 [=](const std::vector<Tensor>& in) -> Outputs {
                   const Tensor w = affine ? in[1] : Tensor();
                   const Tensor b = affine ? in[2] : Tensor();
                   auto o = layer_norm(in[0], 1, w, b);
                   if (!o.ok()) return o.status();
                   auto g = layer_norm_backward(in.back(), in[0], *o, 1, w);
                   if (!g.ok()) return g.status();
                   if (!affine) return std::vector<Tensor>{g->grad_x};
                   return std::vector<Tensor>{g->grad_x, g->grad_weight,
                                              g->grad_bias};
                 },
                 [=](int index, const std::vector<std::vector<double>>&) {
                   Tolerance t = TranscendentalTolerance(dtype);
                   t.rtol = 64 * UnitRoundoff(dtype) + 1e-5;
                   // Parameter gradients sum 513 rows.
                   t.atol = (index == 0 ? 16 : 16 * 513) * UnitRoundoff(dtype);
                   return t;
                 },
                 kSeed);
           }});
    }
  }
}

}  // namespace mixrt::conformance
