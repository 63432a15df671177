#include <cmath>

#include "absl/strings/str_cat.h"
#include "core/kernels/dropout.h"
#include "core/kernels/pointwise.h"
#include "core/tensor/factories.h"
#include "mixrt/op_names.h"
#include "plugins/conformance/case_util.h"

namespace mixrt::conformance {

using namespace ::mixrt::kernels;  // The ops the cases run.

void AddPointwiseCases(std::vector<Case>* cases) {
  const std::pair<const char*, MixrtBinaryKind> binaries[] = {
      {"add", MIXRT_BINARY_ADD},         {"sub", MIXRT_BINARY_SUB},
      {"mul", MIXRT_BINARY_MUL},         {"div", MIXRT_BINARY_DIV},
      {"maximum", MIXRT_BINARY_MAXIMUM}, {"minimum", MIXRT_BINARY_MINIMUM},
      {"pow", MIXRT_BINARY_POW}};
  for (DType dtype : kFloatTypes) {
    for (const auto& [name, kind] : binaries) {
      for (auto [shape_name, specs] : BinaryShapes()) {
        if (kind == MIXRT_BINARY_POW) {
          for (InputSpec& s : specs) {
            if (s.values == Values::kNormal) s.values = Values::kPositive;
          }
        }
        const MixrtBinaryKind k = kind;
        const std::vector<InputSpec> typed = WithDtype(specs, dtype);
        cases->push_back(
            {absl::StrCat("binary/", name, "/", shape_name, "/",
                          DTypeName(dtype)),
             MIXRT_OP_CLASS_ELEMENTWISE, dtype, [=](const Devices& d) {
               CompareOp(
                   d, typed,
                   [k](const std::vector<Tensor>& in) {
                     return One(binary(k, in[0], in[1]));
                   },
                   Fixed(k == MIXRT_BINARY_POW ? TranscendentalTolerance(dtype)
                                               : ExactTolerance(dtype)),
                   kSeed);
             }});
      }
    }
  }

  struct Unary {
    const char* name;
    MixrtUnaryKind kind;
    double alpha, beta;
    Values values;
  };
  const Unary unaries[] = {
      {"neg", MIXRT_UNARY_NEG, 0, 0, Values::kNormal},
      {"abs", MIXRT_UNARY_ABS, 0, 0, Values::kNormal},
      {"relu", MIXRT_UNARY_RELU, 0, 0, Values::kNormal},
      {"leaky_relu", MIXRT_UNARY_LEAKY_RELU, 0.01, 0, Values::kNormal},
      {"gelu", MIXRT_UNARY_GELU, 0, 0, Values::kNormal},
      {"gelu_tanh", MIXRT_UNARY_GELU_TANH, 0, 0, Values::kNormal},
      {"silu", MIXRT_UNARY_SILU, 0, 0, Values::kNormal},
      {"sigmoid", MIXRT_UNARY_SIGMOID, 0, 0, Values::kNormal},
      {"tanh", MIXRT_UNARY_TANH, 0, 0, Values::kNormal},
      {"exp", MIXRT_UNARY_EXP, 0, 0, Values::kNormal},
      {"log", MIXRT_UNARY_LOG, 0, 0, Values::kPositive},
      {"log1p", MIXRT_UNARY_LOG1P, 0, 0, Values::kPositive},
      {"sqrt", MIXRT_UNARY_SQRT, 0, 0, Values::kPositive},
      {"rsqrt", MIXRT_UNARY_RSQRT, 0, 0, Values::kPositive},
      {"clamp", MIXRT_UNARY_CLAMP, -0.5, 0.5, Values::kNormal},
      {"pow_scalar", MIXRT_UNARY_POW_SCALAR, 1.5, 0, Values::kPositive},
      {"scale", MIXRT_UNARY_SCALE, 2.5, -1, Values::kNormal},
  };
  for (DType dtype : kFloatTypes) {
    for (const Unary& u : unaries) {
      for (const char* variant : {"batch513", "transposed", "special"}) {
        InputSpec x{{513, 7}, dtype, u.values};
        if (std::string(variant) == "transposed") {
          x = {{9, 17}, dtype, u.values, true};
        } else if (std::string(variant) == "special") {
          x = {{21, 5}, dtype, Values::kSpecial};
        }
        cases->push_back(
            {absl::StrCat("unary/", u.name, "/", variant, "/",
                          DTypeName(dtype)),
             MIXRT_OP_CLASS_ELEMENTWISE, dtype, [=](const Devices& d) {
               CompareOp(
                   d, {x},
                   [u](const std::vector<Tensor>& in) {
                     return One(unary(u.kind, in[0], u.alpha, u.beta));
                   },
                   Fixed(TranscendentalTolerance(dtype)), kSeed);
             }});
      }
      // Gradients: compared with the reference's finite-difference-checked
      // backward kernels (tests/kernels). Derivative formulas add terms of size
      // about 1 + |x| (gelu' = cdf + x pdf) that may cancel, so f32 leaves
      // an absolute error near eps * |g| * (1 + |x|).
      const InputSpec g{{513, 7}, dtype, Values::kNormal};
      const InputSpec x{{513, 7}, dtype, u.values};
      cases->push_back(
          {absl::StrCat("unary_backward/", u.name, "/", DTypeName(dtype)),
           MIXRT_OP_CLASS_ELEMENTWISE, dtype, [=](const Devices& d) {
             CompareOp(
                 d, {g, x},
                 [u](const std::vector<Tensor>& in) {
                   return One(
                       unary_backward(u.kind, in[0], in[1], u.alpha, u.beta));
                 },
                 [=](int, const std::vector<std::vector<double>>& in) {
                   Tolerance t = TranscendentalTolerance(dtype);
                   for (size_t i = 0; i < in[0].size(); ++i) {
                     t.extra.push_back(64 * UnitRoundoff(DType::kF32) *
                                       std::fabs(in[0][i]) *
                                       (1 + std::fabs(in[1][i])));
                   }
                   return t;
                 },
                 kSeed);
           }});
    }
    for (MixrtCompareKind kind :
         {MIXRT_COMPARE_EQ, MIXRT_COMPARE_NE, MIXRT_COMPARE_LT,
          MIXRT_COMPARE_LE, MIXRT_COMPARE_GT, MIXRT_COMPARE_GE}) {
      const InputSpec a{{21, 5}, dtype, Values::kSpecial};
      const InputSpec b{{5}, dtype, Values::kSpecial};
      cases->push_back(
          {absl::StrCat("compare/", MixrtOpVariantName(MIXRT_OP_COMPARE, kind),
                        "/", DTypeName(dtype)),
           MIXRT_OP_CLASS_ELEMENTWISE, dtype, [=](const Devices& d) {
             CompareOp(
                 d, {a, b},
                 [kind](const std::vector<Tensor>& in) {
                   return One(compare(kind, in[0], in[1]));
                 },
                 Fixed({0, 0, {}}), kSeed);
           }});
    }
    cases->push_back(
        {absl::StrCat("where/broadcast/", DTypeName(dtype)),
         MIXRT_OP_CLASS_ELEMENTWISE, dtype, [=](const Devices& d) {
           CompareOp(
               d, {{{513, 1}, dtype}, {{513, 7}, dtype}, {{7}, dtype}},
               [](const std::vector<Tensor>& in) -> Outputs {
                 auto zero = zeros({}, in[0].dtype(), in[0].device());
                 if (!zero.ok()) return zero.status();
                 auto cond = gt(in[0], *zero);
                 if (!cond.ok()) return cond.status();
                 return One(where(*cond, in[1], in[2]));
               },
               Fixed({0, 0, {}}), kSeed);
         }});
    // The fused op (or, on a 1.0 plugin, the host's composition) against
    // the reference: the same mask from the same stream, the backward's
    // regenerated one included; inf and NaN dropped stay NaN. 37 x 65
    // transposed: odd lengths and strides through every row path.
    for (Values values : {Values::kNormal, Values::kSpecial}) {
      cases->push_back(
          {absl::StrCat("dropout/forward_backward/",
                        values == Values::kNormal ? "normal" : "special", "/",
                        DTypeName(dtype)),
           MIXRT_OP_CLASS_ELEMENTWISE, dtype, [=](const Devices& d) {
             CompareOp(
                 d, {{{37, 65}, dtype, values, true}, {{65, 37}, dtype}},
                 [](const std::vector<Tensor>& in) -> Outputs {
                   Generator stream(77);
                   stream.Reserve(5);  // A counter not a multiple of 8.
                   auto fwd = dropout(in[0], 0.25, &stream);
                   if (!fwd.ok()) return fwd.status();
                   auto grad = dropout_backward(in[1], fwd->state);
                   if (!grad.ok()) return grad.status();
                   return std::vector<Tensor>{fwd->y, *grad};
                 },
                 Fixed(ExactTolerance(dtype)), kSeed);
           }});
    }
  }
}

}  // namespace mixrt::conformance
