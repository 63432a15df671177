#include "plugins/conformance/conformance_cases.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "core/kernels/amp_kernels.h"
#include "core/kernels/batch_norm.h"
#include "core/kernels/conv2d.h"
#include "core/kernels/dropout.h"
#include "core/kernels/embedding.h"
#include "core/kernels/layer_norm.h"
#include "core/kernels/loss.h"
#include "core/kernels/matmul.h"
#include "core/kernels/optimizer_kernels.h"
#include "core/kernels/pointwise.h"
#include "core/kernels/pool2d.h"
#include "core/kernels/reduce.h"
#include "core/kernels/softmax.h"
#include "core/tensor/factories.h"
#include "gtest/gtest.h"

namespace mixrt::conformance {
namespace {

using namespace ::mixrt::kernels;  // The ops the cases run.

constexpr DType kFloatTypes[] = {DType::kF32, DType::kF16, DType::kBF16};
constexpr uint64_t kSeed = 2024;

using Outputs = absl::StatusOr<std::vector<Tensor>>;

Outputs One(absl::StatusOr<Tensor> t) {
  if (!t.ok()) return t.status();
  return std::vector<Tensor>{*t};
}

ToleranceFn Fixed(Tolerance t) {
  return [t](int, const std::vector<std::vector<double>>&) { return t; };
}

// Shape variants for pointwise ops: name -> input specs (before dtype).
std::vector<std::pair<std::string, std::vector<InputSpec>>> BinaryShapes() {
  return {
      {"batch513", {{{513, 7}}, {{513, 7}}}},
      {"broadcast", {{{513, 1}}, {{7}}}},
      {"transposed",
       {{{9, 17}, DType::kF32, Values::kNormal, true}, {{9, 17}}}},
      {"empty", {{{0, 5}}, {{5}}}},
      {"scalar", {{{1}}, {{1}}}},
      {"wide",
       {{{33, 3}, DType::kF32, Values::kWide},
        {{33, 3}, DType::kF32, Values::kWide}}},
      {"special",
       {{{21, 5}, DType::kF32, Values::kSpecial},
        {{21, 5}, DType::kF32, Values::kSpecial}}},
  };
}

std::vector<InputSpec> WithDtype(std::vector<InputSpec> specs, DType dtype) {
  for (InputSpec& s : specs) {
    if (s.values != Values::kLabels) s.dtype = dtype;
  }
  return specs;
}

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
      // backward kernels (tests/ops). Derivative formulas add terms of size
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
      cases->push_back({absl::StrCat("compare/", kind, "/", DTypeName(dtype)),
                        MIXRT_OP_CLASS_ELEMENTWISE, dtype,
                        [=](const Devices& d) {
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
  }
}

void AddCastCases(std::vector<Case>* cases) {
  const DType all[] = {DType::kF32, DType::kF16, DType::kBF16,
                       DType::kI32, DType::kI64, DType::kBool};
  for (DType from : kFloatTypes) {
    for (DType to : all) {
      for (Values values : {Values::kWide, Values::kSpecial}) {
        const InputSpec x{{37, 5}, from, values, true};
        cases->push_back(
            {absl::StrCat("cast/", DTypeName(from), "_to_", DTypeName(to),
                          values == Values::kWide ? "/wide" : "/special"),
             MIXRT_OP_CLASS_CAST, from, [=](const Devices& d) {
               CompareOp(
                   d, {x},
                   [to](const std::vector<Tensor>& in) {
                     return One(in[0].to(to));
                   },
                   Fixed({0, 0, {}}), kSeed);  // Conversions are exact.
             }});
      }
    }
  }
  for (DType dtype : kFloatTypes) {
    cases->push_back(
        {absl::StrCat("random/normal_and_uniform/", DTypeName(dtype)),
         MIXRT_OP_CLASS_CAST, dtype, [dtype](const Devices& d) {
           // Same seed and offset on both devices: the ABI fixes the bits.
           for (bool normal : {false, true}) {
             Generator g1(99), g2(99);
             auto a = normal ? randn({513, 3}, dtype, d.plugin, 0, 1, &g1)
                             : rand({513, 3}, dtype, d.plugin, -2, 3, &g1);
             auto b = normal ? randn({513, 3}, dtype, d.reference, 0, 1, &g2)
                             : rand({513, 3}, dtype, d.reference, -2, 3, &g2);
             ASSERT_TRUE(a.ok() && b.ok());
             EXPECT_EQ(*a->to_bytes(), *b->to_bytes())
                 << (normal ? "randn" : "rand");
           }
         }});
  }
}

// Sum of |x| over the reduced group of each output, for reductions' error
// bounds: accumulating n terms in f32 costs up to n * 2^-24 * sum|x|.
std::vector<double> AbsSumBound(const std::vector<double>& x, int64_t outer,
                                int64_t group, int64_t inner) {
  std::vector<double> bound(outer * inner, 0.0);
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t g = 0; g < group; ++g)
      for (int64_t i = 0; i < inner; ++i) {
        double v = std::fabs(x[(o * group + g) * inner + i]);
        if (!std::isfinite(v)) v = 0;
        bound[o * inner + i] += v;
      }
  for (double& b : bound)
    b *= static_cast<double>(group) * std::ldexp(1.0, -23);
  return bound;
}

void AddReduceCases(std::vector<Case>* cases) {
  struct R {
    const char* name;
    MixrtReduceKind kind;
  };
  const R kinds[] = {
      {"sum", MIXRT_REDUCE_SUM},         {"mean", MIXRT_REDUCE_MEAN},
      {"amax", MIXRT_REDUCE_MAX},        {"amin", MIXRT_REDUCE_MIN},
      {"abs_max", MIXRT_REDUCE_ABS_MAX}, {"var", MIXRT_REDUCE_VAR}};
  // [outer, group, inner] views of a [513, 7, 3] tensor for each axis set.
  struct Axes {
    const char* name;
    std::vector<int64_t> dims;
    int64_t outer, group, inner;
  };
  const Axes axes[] = {{"last", {2}, 513 * 7, 3, 1},
                       {"first", {0}, 1, 513, 21},
                       {"middle", {1}, 513, 7, 3},
                       {"all", {}, 1, 513 * 21, 1}};
  for (DType dtype : kFloatTypes) {
    for (const R& r : kinds) {
      for (const Axes& a : axes) {
        const InputSpec x{{513, 7, 3}, dtype};
        cases->push_back(
            {absl::StrCat("reduce/", r.name, "/", a.name, "/",
                          DTypeName(dtype)),
             MIXRT_OP_CLASS_REDUCTION, dtype, [=](const Devices& d) {
               CompareOp(
                   d, {x},
                   [r, a](const std::vector<Tensor>& in) {
                     return One(reduce(r.kind, in[0], a.dims, /*keepdim=*/true,
                                       r.kind == MIXRT_REDUCE_VAR ? 1.0 : 0.0));
                   },
                   [=](int, const std::vector<std::vector<double>>& in) {
                     Tolerance t = TranscendentalTolerance(dtype);
                     t.extra = AbsSumBound(in[0], a.outer, a.group, a.inner);
                     if (r.kind == MIXRT_REDUCE_MEAN) {
                       for (double& e : t.extra) e /= a.group;
                     }
                     if (r.kind == MIXRT_REDUCE_VAR) {
                       // Sums of squares: bounded by the squares' sum.
                       for (double& e : t.extra) e = e * 8 / (a.group - 1);
                     }
                     return t;
                   },
                   kSeed);
             }});
      }
    }
  }
}

void AddMatmulCases(std::vector<Case>* cases) {
  struct M {
    const char* name;
    std::vector<int64_t> a, b;
    bool a_t, b_t;
    bool bias;
    MixrtActivation act;
    bool f32_out;
  };
  const M shapes[] = {
      {"batch513",
       {513, 65},
       {65, 33},
       false,
       false,
       false,
       MIXRT_ACTIVATION_NONE,
       false},
      {"transposed_b",
       {40, 24},
       {24, 17},
       false,
       true,
       false,
       MIXRT_ACTIVATION_NONE,
       false},
      {"transposed_a",
       {40, 24},
       {24, 17},
       true,
       false,
       false,
       MIXRT_ACTIVATION_NONE,
       false},
      {"batched",
       {3, 17, 9},
       {3, 9, 5},
       false,
       false,
       false,
       MIXRT_ACTIVATION_NONE,
       false},
      {"broadcast_batch",
       {4, 17, 9},
       {9, 5},
       false,
       false,
       false,
       MIXRT_ACTIVATION_NONE,
       false},
      {"bias_relu",
       {513, 31},
       {31, 15},
       false,
       false,
       true,
       MIXRT_ACTIVATION_RELU,
       false},
      {"bias_gelu_f32_out",
       {77, 64},
       {64, 40},
       false,
       true,
       true,
       MIXRT_ACTIVATION_GELU,
       true},
      {"one_element",
       {1, 1},
       {1, 1},
       false,
       false,
       false,
       MIXRT_ACTIVATION_NONE,
       false},
      // A transposed single row: strides (1, 1), which once gave oneDNN's
      // GEMM an invalid leading dimension.
      {"transposed_single_row",
       {1, 16},
       {16, 9},
       true,
       false,
       false,
       MIXRT_ACTIVATION_NONE,
       true},
      {"special_relu",
       {21, 5},
       {5, 7},
       false,
       false,
       true,
       MIXRT_ACTIVATION_RELU,
       false},
      {"empty_inner",
       {5, 0},
       {0, 3},
       false,
       false,
       true,
       MIXRT_ACTIVATION_NONE,
       false},
  };
  for (DType dtype : kFloatTypes) {
    for (const M& m : shapes) {
      // NaN and infinities must survive the fused epilogue.
      const Values va = std::string(m.name) == "special_relu" ? Values::kSpecial
                                                              : Values::kNormal;
      std::vector<InputSpec> specs = {{m.a, dtype, va, m.a_t},
                                      {m.b, dtype, Values::kNormal, m.b_t}};
      if (m.bias) specs.push_back({{m.b.back()}, dtype});
      cases->push_back(
          {absl::StrCat("matmul/", m.name, "/", DTypeName(dtype)),
           MIXRT_OP_CLASS_MATMUL, dtype, [=](const Devices& d) {
             CompareOp(
                 d, specs,
                 [m](const std::vector<Tensor>& in) {
                   MatmulOptions o;
                   o.activation = m.act;
                   if (m.f32_out) o.out_dtype = DType::kF32;
                   if (m.bias) {
                     auto bt = in[1].transpose(-1, -2);
                     if (!bt.ok()) return Outputs(bt.status());
                     return One(linear(in[0], *bt, in[2], o));
                   }
                   return One(matmul(in[0], in[1], o));
                 },
                 [=](int, const std::vector<std::vector<double>>& in) {
                   // Row-major host values of A [.., M, K] and B [.., K, N].
                   const DType out = m.f32_out ? DType::kF32 : dtype;
                   Tolerance t = TranscendentalTolerance(out);
                   const int64_t rows = m.a[m.a.size() - 2];
                   const int64_t k = m.a.back();
                   const int64_t n = m.b.back();
                   const int64_t batches = static_cast<int64_t>(in[0].size()) /
                                           std::max<int64_t>(rows * k, 1);
                   const bool b_batched = m.b.size() == m.a.size();
                   t.extra.assign(batches * rows * n, 0.0);
                   for (int64_t bt = 0; bt < batches; ++bt)
                     for (int64_t i = 0; i < rows; ++i)
                       for (int64_t j = 0; j < n; ++j) {
                         double s = 0;
                         for (int64_t p = 0; p < k; ++p) {
                           s += std::fabs(in[0][(bt * rows + i) * k + p]) *
                                std::fabs(
                                    in[1]
                                      [((b_batched ? bt : 0) * k + p) * n + j]);
                         }
                         t.extra[(bt * rows + i) * n + j] =
                             (k + 2) * std::ldexp(1.0, -23) * s +
                             2 * UnitRoundoff(out) * s;
                       }
                   return t;
                 },
                 kSeed);
           }});
    }
  }
}

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

void AddOptimizerCases(std::vector<Case>* cases) {
  for (DType dtype : kFloatTypes) {
    cases->push_back(
        {absl::StrCat("non_finite_check_and_unscale/", DTypeName(dtype)),
         MIXRT_OP_CLASS_OPTIMIZER, dtype, [=](const Devices& d) {
           CompareOp(
               d, {{{513, 3}, dtype}, {{7}, dtype, Values::kSpecial}},
               [](const std::vector<Tensor>& in) -> Outputs {
                 const Device& dev = in[0].device();
                 auto found = zeros({1}, DType::kF32, dev);
                 auto inv = full({1}, 0.125, DType::kF32, dev);
                 auto a = in[0].clone();
                 if (!found.ok() || !inv.ok() || !a.ok()) {
                   return absl::InternalError("setup failed");
                 }
                 auto found2 = zeros({1}, DType::kF32, dev);
                 auto b = in[1].clone();
                 absl::Status s =
                     non_finite_check_and_unscale_({*a}, *found, *inv);
                 if (s.ok()) {
                   s = non_finite_check_and_unscale_({*a, *b}, *found2, *inv);
                 }
                 if (!s.ok()) return s;
                 return std::vector<Tensor>{*a, *found, *b, *found2};
               },
               Fixed(ExactTolerance(dtype)), kSeed);
         }});
  }
  cases->push_back(
      {"optimizer/sgd_and_adamw_scaled", MIXRT_OP_CLASS_OPTIMIZER, DType::kF32,
       [](const Devices& d) {
         CompareOp(
             d, {{{513, 7}}, {{513, 7}}, {{513, 7}, DType::kF16}},
             [](const std::vector<Tensor>& in) -> Outputs {
               const Device& dev = in[0].device();
               auto p = in[0].clone();
               auto buf = zeros({513, 7}, DType::kF32, dev);
               auto p2 = in[0].clone();
               auto m = zeros({513, 7}, DType::kF32, dev);
               auto v = zeros({513, 7}, DType::kF32, dev);
               auto step = zeros({1}, DType::kF32, dev);
               auto scale = full({1}, 1024, DType::kF32, dev);
               auto no_inf = zeros({1}, DType::kF32, dev);
               if (!p.ok() || !buf.ok() || !p2.ok() || !m.ok() || !v.ok() ||
                   !step.ok() || !scale.ok() || !no_inf.ok()) {
                 return absl::InternalError("setup failed");
               }
               MixrtSgdAttrs sgd{};
               sgd.lr = 0.1;
               sgd.momentum = 0.9;
               sgd.weight_decay = 1e-4;
               sgd.nesterov = 1;
               MixrtAdamWAttrs adam{};
               adam.lr = 1e-3;
               adam.beta1 = 0.9;
               adam.beta2 = 0.999;
               adam.eps = 1e-8;
               adam.weight_decay = 0.01;
               for (int i = 0; i < 3; ++i) {
                 sgd.first_step = i == 0;
                 // f16 gradients of f32 master weights, scaled by 1024.
                 absl::Status s =
                     sgd_step_(*p, in[2], *buf, sgd, {*scale, *no_inf});
                 if (s.ok()) {
                   s = adamw_step_(*p2, in[1], *m, *v, *step, adam,
                                   {*scale, *no_inf});
                 }
                 if (!s.ok()) return s;
               }
               return std::vector<Tensor>{*p, *buf, *p2, *m, *v, *step};
             },
             Fixed({1e-5, 1e-6, {}}), kSeed);
       }});
  cases->push_back(
      {"optimizer/update_scale_trajectory", MIXRT_OP_CLASS_OPTIMIZER,
       DType::kF32, [](const Devices& d) {
         std::vector<double> trajectory[2];
         const Device devices[2] = {d.plugin, d.reference};
         for (int k = 0; k < 2; ++k) {
           auto scale = full({1}, 65536, DType::kF32, devices[k]);
           auto tracker = zeros({1}, DType::kI32, devices[k]);
           ASSERT_TRUE(scale.ok() && tracker.ok());
           for (int step = 0; step < 12; ++step) {
             auto found =
                 full({1}, step % 5 == 4 ? 1.0 : 0.0, DType::kF32, devices[k]);
             ASSERT_TRUE(found.ok());
             ASSERT_TRUE(
                 update_scale_(*scale, *tracker, *found, 2.0, 0.5, 3).ok());
             trajectory[k].push_back(*scale->item());
             trajectory[k].push_back(*tracker->item());
           }
         }
         EXPECT_EQ(trajectory[0], trajectory[1]);
       }});
  // torch._amp_update_scale_ multiplies the f32 scale by the double factor
  // and rounds once; a plugin rounding the factor to f32 first leaves
  // PyTorch's trajectory within a few updates for factors like 1.1 and 0.3.
  cases->push_back(
      {"optimizer/update_scale_rounds_like_pytorch", MIXRT_OP_CLASS_OPTIMIZER,
       DType::kF32, [](const Devices& d) {
         auto scale = full({1}, 1000, DType::kF32, d.plugin);
         auto tracker = zeros({1}, DType::kI32, d.plugin);
         ASSERT_TRUE(scale.ok() && tracker.ok());
         float want = 1000.0f;
         for (int step = 0; step < 12; ++step) {
           const bool inf = step >= 8;
           auto found = full({1}, inf ? 1.0 : 0.0, DType::kF32, d.plugin);
           ASSERT_TRUE(found.ok());
           ASSERT_TRUE(
               update_scale_(*scale, *tracker, *found, 1.1, 0.3, 1).ok());
           want = static_cast<float>(static_cast<double>(want) *
                                     (inf ? 0.3 : 1.1));
           ASSERT_EQ(*scale->item(), want) << "after update " << step;
         }
       }});
}

void AddConvPoolCases(std::vector<Case>* cases) {
  struct C {
    const char* name;
    std::vector<int64_t> x, w;
    Conv2dOptions o;
  };
  Conv2dOptions strided;
  strided.stride = {2, 2};
  strided.padding = {1, 1};
  Conv2dOptions dilated;
  dilated.dilation = {2, 2};
  dilated.padding = {2, 2};
  Conv2dOptions grouped;
  grouped.groups = 3;
  grouped.padding = {1, 1};
  grouped.activation = MIXRT_ACTIVATION_RELU;
  Conv2dOptions grouped_relu_single;
  grouped_relu_single.activation = MIXRT_ACTIVATION_RELU;
  const C convs[] = {
      {"resnet_like", {2, 16, 14, 14}, {32, 16, 3, 3}, strided},
      {"dilated", {3, 5, 11, 9}, {7, 5, 3, 3}, dilated},
      {"grouped_relu", {2, 9, 8, 8}, {6, 3, 3, 3}, grouped},
      {"pointwise_1x1", {4, 8, 5, 7}, {12, 8, 1, 1}, Conv2dOptions()},
      {"special_relu", {1, 2, 5, 5}, {3, 2, 3, 3}, grouped_relu_single},
  };
  for (DType dtype : kFloatTypes) {
    for (const C& c : convs) {
      const std::string base =
          absl::StrCat("conv2d/", c.name, "/", DTypeName(dtype));
      // Inner products of C/groups * kh * kw terms of size ~1.
      const double k = static_cast<double>(c.w[1] * c.w[2] * c.w[3]);
      Tolerance tol = TranscendentalTolerance(dtype);
      tol.atol = (k + 2) * 4 * std::ldexp(1.0, -23) * std::sqrt(k) +
                 4 * UnitRoundoff(dtype) * std::sqrt(k);
      // NaN and infinities in the input must survive the activation.
      const Values xv = std::string(c.name) == "special_relu" ? Values::kSpecial
                                                              : Values::kNormal;
      const std::vector<InputSpec> fwd = {
          {c.x, dtype, xv}, {c.w, dtype}, {{c.w[0]}, dtype}};
      cases->push_back(
          {base, MIXRT_OP_CLASS_CONV, dtype, [=](const Devices& d) {
             CompareOp(
                 d, fwd,
                 [=](const std::vector<Tensor>& in) {
                   return One(conv2d(in[0], in[1], in[2], c.o));
                 },
                 Fixed(tol), kSeed);
           }});
      // grad_out has the forward output's shape.
      std::vector<int64_t> y = {
          c.x[0], c.w[0],
          Conv2dOutputSize(c.x[2], c.w[2], c.o.stride[0], c.o.padding[0],
                           c.o.dilation[0]),
          Conv2dOutputSize(c.x[3], c.w[3], c.o.stride[1], c.o.padding[1],
                           c.o.dilation[1])};
      Conv2dOptions plain = c.o;
      plain.activation = MIXRT_ACTIVATION_NONE;
      Tolerance btol = tol;
      btol.atol *= 4 * std::sqrt(static_cast<double>(y[0] * y[2] * y[3]));
      cases->push_back(
          {absl::StrCat(base, "/backward"), MIXRT_OP_CLASS_CONV, dtype,
           [=](const Devices& d) {
             CompareOp(
                 d, {{y, dtype}, {c.w, dtype}, {c.x, dtype}},
                 [=](const std::vector<Tensor>& in) -> Outputs {
                   auto gx = conv2d_backward_data(in[0], in[1], c.x, plain);
                   if (!gx.ok()) return gx.status();
                   auto gw =
                       conv2d_backward_weights(in[0], in[2], c.w, true, plain);
                   if (!gw.ok()) return gw.status();
                   return std::vector<Tensor>{*gx, gw->grad_weight,
                                              gw->grad_bias};
                 },
                 Fixed(btol), kSeed);
           }});
    }
    for (MixrtPoolKind kind : {MIXRT_POOL_MAX, MIXRT_POOL_AVG}) {
      Pool2dOptions o;
      o.kind = kind;
      o.kernel = {3, 3};
      o.stride = {2, 2};
      o.padding = {1, 1};
      const std::string base =
          absl::StrCat("pool2d/", kind == MIXRT_POOL_MAX ? "max" : "avg", "/",
                       DTypeName(dtype));
      const InputSpec x{{2, 3, 13, 11}, dtype};
      // Averages sum 9 terms of |x| < ~4 (and may cancel): f32 accumulation
      // error on that scale.
      Tolerance tol = TranscendentalTolerance(dtype);
      tol.atol =
          9 * 4 * 4 * UnitRoundoff(DType::kF32) + 2 * UnitRoundoff(dtype);
      cases->push_back(
          {base, MIXRT_OP_CLASS_POOL, dtype, [=](const Devices& d) {
             CompareOp(
                 d, {x},
                 [=](const std::vector<Tensor>& in) {
                   return One(pool2d(in[0], o));
                 },
                 Fixed(tol), kSeed);
           }});
      cases->push_back({absl::StrCat(base, "/backward"), MIXRT_OP_CLASS_POOL,
                        dtype, [=](const Devices& d) {
                          CompareOp(
                              d, {x, {{2, 3, 7, 6}, dtype}},
                              [=](const std::vector<Tensor>& in) {
                                return One(pool2d_backward(in[1], in[0], o));
                              },
                              Fixed(tol), kSeed);
                        }});
    }
  }
}

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
    cases->push_back({absl::StrCat("dropout/mask/", DTypeName(dtype)),
                      MIXRT_OP_CLASS_ELEMENTWISE, dtype, [=](const Devices& d) {
                        CompareOp(
                            d, {{{513, 9}, dtype}},
                            [](const std::vector<Tensor>& in) -> Outputs {
                              Generator g(5);
                              auto out = dropout(in[0], 0.3, &g);
                              if (!out.ok()) return out.status();
                              return std::vector<Tensor>{out->y, out->scale};
                            },
                            Fixed(ExactTolerance(dtype)), kSeed);
                      }});
  }
}

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

}  // namespace

std::vector<Case> AllCases() {
  std::vector<Case> cases;
  AddPointwiseCases(&cases);
  AddCastCases(&cases);
  AddReduceCases(&cases);
  AddMatmulCases(&cases);
  AddSoftmaxNormCases(&cases);
  AddLossCases(&cases);
  AddOptimizerCases(&cases);
  AddConvPoolCases(&cases);
  AddBatchNormEmbeddingCases(&cases);
  AddRegressionLossCases(&cases);
  return cases;
}

}  // namespace mixrt::conformance
