#include <cmath>

#include "absl/strings/str_cat.h"
#include "core/kernels/matmul.h"
#include "plugins/conformance/case_util.h"

namespace mixrt::conformance {

using namespace ::mixrt::kernels;  // The ops the cases run.

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

}  // namespace mixrt::conformance
