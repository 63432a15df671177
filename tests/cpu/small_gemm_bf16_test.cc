// The CPU plugin's avx512_bf16 small products against products computed
// here in double from the same bf16 values. Products of two bf16 are exact
// in f32, so the error is f32 accumulation of k terms (within k + 2 f32
// ulps of the sum of magnitudes) plus, for a bf16 c, one rounding to bf16
// (half a bf16 ulp, at most 2^-8 relative). Every operand layout the plugin
// hands over: a row-major (read in place at even k, packed at odd k) or
// transposed (a weight gradient's dY^T), b row-major, transposed (a
// Linear's weight) or strided; ragged sizes must give exactly the valid
// products and write nothing past them. Skipped where the CPU has no
// avx512_bf16 (oneDNN runs these products there; the conformance suite
// covers both).
#include "backends/cpu/gemm/small_gemm_bf16.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "backends/cpu/gemm/small_gemm.h"
#include "gtest/gtest.h"
#include "mixrt/float_convert.h"
#include "tests/testing/uniform_floats.h"

namespace mixrt::cpu {
namespace {

using testing::UniformFloats;

std::vector<uint16_t> Bf16s(int64_t n, uint32_t seed) {
  std::vector<uint16_t> v;
  for (float x : UniformFloats(n, seed)) v.push_back(sdk::F32ToBF16Bits(x));
  return v;
}

double Value(uint16_t bits) { return sdk::BF16BitsToF32(bits); }

enum class BLayout { kRowMajor, kTransposed, kStrided };

struct Case {
  int64_t m, n, k;
  BLayout b_layout;
  bool a_transposed;
  MixrtDtype c_dtype;
  bool bias;
  MixrtDtype bias_dtype;
  int64_t bias_stride;
  float beta;
  bool relu = false;
};

void Check(const Case& t) {
  SCOPED_TRACE(::testing::Message()
               << "m " << t.m << " n " << t.n << " k " << t.k << " b layout "
               << static_cast<int>(t.b_layout) << " a transposed "
               << t.a_transposed << " c "
               << (t.c_dtype == MIXRT_DTYPE_F32 ? "f32" : "bf16") << " bias "
               << t.bias << " stride " << t.bias_stride << " beta " << t.beta
               << " relu " << t.relu);
  ASSERT_TRUE(SmallGemmBf16Applies(t.m, t.n, t.k));
  // Padded leading dimensions (even, so that an even k reads a in place):
  // reading or writing past a row shows.
  const int64_t pad = 4;
  const std::vector<uint16_t> a = Bf16s((t.m + pad) * (t.k + pad), 1);
  const std::vector<uint16_t> b = Bf16s(3 * (t.k + pad) * (t.n + pad), 2);
  const std::vector<float> bias_f32 = UniformFloats(t.n + 1, 3);
  const std::vector<uint16_t> bias_bf16 = Bf16s(t.n + 1, 3);
  const int64_t ldc = t.n + pad;
  const bool f32 = t.c_dtype == MIXRT_DTYPE_F32;
  std::vector<float> c32 = UniformFloats(t.m * ldc, 4);
  std::vector<uint16_t> c16 = Bf16s(t.m * ldc, 4);
  const std::vector<float> c32_before = c32;
  const std::vector<uint16_t> c16_before = c16;
  const auto c_before = [&](int64_t at) {
    return f32 ? static_cast<double>(c32_before[at]) : Value(c16_before[at]);
  };

  SmallGemmBf16 g;
  g.m = t.m;
  g.n = t.n;
  g.k = t.k;
  g.a = a.data();
  g.a_rows = t.a_transposed ? 1 : t.k + pad;
  g.a_cols = t.a_transposed ? t.m + pad : 1;
  g.b = b.data();
  switch (t.b_layout) {
    case BLayout::kRowMajor:
      g.b_rows = t.n + pad;
      g.b_cols = 1;
      break;
    case BLayout::kTransposed:
      g.b_rows = 1;
      g.b_cols = t.k + pad;
      break;
    case BLayout::kStrided:
      g.b_rows = 3 * (t.n + pad);
      g.b_cols = 3;
      break;
  }
  g.c = f32 ? static_cast<void*>(c32.data()) : static_cast<void*>(c16.data());
  g.c_dtype = t.c_dtype;
  g.ldc = ldc;
  const bool bias_f = t.bias_dtype == MIXRT_DTYPE_F32;
  g.bias = !t.bias  ? nullptr
           : bias_f ? static_cast<const void*>(bias_f32.data())
                    : static_cast<const void*>(bias_bf16.data());
  g.bias_dtype = t.bias_dtype;
  g.bias_stride = t.bias_stride;
  g.beta = t.beta;
  g.relu = t.relu;
  RunSmallGemmBf16(g);

  for (int64_t i = 0; i < t.m; ++i) {
    for (int64_t j = 0; j < ldc; ++j) {
      const int64_t at = i * ldc + j;
      const double got = f32 ? static_cast<double>(c32[at]) : Value(c16[at]);
      if (j >= t.n) {
        ASSERT_EQ(got, c_before(at)) << "wrote past row " << i;
        continue;
      }
      double want = 0, magnitudes = 0;
      for (int64_t p = 0; p < t.k; ++p) {
        const double x = Value(a[i * g.a_rows + p * g.a_cols]);
        const double y = Value(b[p * g.b_rows + j * g.b_cols]);
        want += x * y;
        magnitudes += std::fabs(x * y);
      }
      if (t.bias) {
        const int64_t s = j * t.bias_stride;
        const double v =
            bias_f ? static_cast<double>(bias_f32[s]) : Value(bias_bf16[s]);
        want += v;
        magnitudes += std::fabs(v);
      }
      if (t.relu) want = std::max(want, 0.0);  // After the bias, before beta.
      if (t.beta != 0) {
        want += t.beta * c_before(at);
        magnitudes += std::fabs(t.beta * c_before(at));
      }
      double tolerance =
          magnitudes * static_cast<double>(t.k + 2) * std::ldexp(1.0, -24);
      if (!f32) tolerance += std::fabs(want) * std::ldexp(1.0, -8);
      ASSERT_NEAR(got, want, tolerance) << "c[" << i << ", " << j << "]";
    }
  }
}

TEST(SmallGemmBf16, ProductsMatchDoubleOnRaggedShapesAndEveryLayout) {
  if (!SmallGemmBf16Applies(1, 1, 1))
    GTEST_SKIP() << "no avx512_bf16 on this machine";
  constexpr MixrtDtype kF32 = MIXRT_DTYPE_F32, kBf16 = MIXRT_DTYPE_BF16;
  for (BLayout layout :
       {BLayout::kRowMajor, BLayout::kTransposed, BLayout::kStrided}) {
    for (const auto& [m, n, k] : std::vector<std::array<int64_t, 3>>{
             {32, 64, 64},  // The small MLP's layers.
             {32, 10, 64},
             {10, 64, 32},  // Its last weight gradient.
             {1, 1, 1},
             {7, 17, 9},    // Odd k: a packed, the last pair half zero.
             {13, 33, 15},  // Two tiles and a 1-row one; 32 + 1 columns.
             {6, 16, 8},
             {5, 31, 23},
             {40, 70, 3}}) {
      for (bool a_transposed : {false, true}) {
        for (MixrtDtype c : {kF32, kBf16}) {
          Check({m, n, k, layout, a_transposed, c, false, kF32, 1, 0});
          Check({m, n, k, layout, a_transposed, c, true, kBf16, 1, 0,
                 /*relu=*/true});
        }
      }
      Check({m, n, k, layout, false, kBf16, true, kF32, 0,
             0});  // One broadcast value.
      Check({m, n, k, layout, true, kF32, true, kF32, 1, 1.5f});
      Check({m, n, k, layout, false, kBf16, false, kF32, 1, 1.0f});
      Check(
          {m, n, k, layout, false, kBf16, true, kBf16, 1, 0.5f, /*relu=*/true});
    }
  }
}

TEST(SmallGemmBf16, NonFiniteValuesPropagateAndReluKeepsNaN) {
  if (!SmallGemmBf16Applies(1, 1, 1))
    GTEST_SKIP() << "no avx512_bf16 on this machine";
  // An overflowed activation must reach the GradScaler's check: inf times a
  // weight stays inf, inf - inf gives NaN, NaN stays NaN, through a bf16 c
  // and through the relu epilogue.
  const uint16_t inf =
      sdk::F32ToBF16Bits(std::numeric_limits<float>::infinity());
  const uint16_t ninf =
      sdk::F32ToBF16Bits(-std::numeric_limits<float>::infinity());
  const uint16_t nan =
      sdk::F32ToBF16Bits(std::numeric_limits<float>::quiet_NaN());
  const uint16_t one = sdk::F32ToBF16Bits(1.0f), zero = 0;
  const uint16_t minus2 = sdk::F32ToBF16Bits(-2.0f);
  const int64_t m = 4, n = 20, k = 2;
  // Rows of a: (inf, 1), (inf, -inf), (NaN, 0), (-2, 0).
  const std::vector<uint16_t> a = {inf, one,  inf,    ninf,
                                   nan, zero, minus2, zero};
  std::vector<uint16_t> b(k * n, one);
  for (bool relu : {false, true}) {
    for (MixrtDtype c_dtype : {MIXRT_DTYPE_F32, MIXRT_DTYPE_BF16}) {
      SCOPED_TRACE(::testing::Message() << "relu " << relu << " c " << c_dtype);
      std::vector<float> c32(m * n, 7.0f);
      std::vector<uint16_t> c16(m * n, one);
      SmallGemmBf16 g;
      g.m = m;
      g.n = n;
      g.k = k;
      g.a = a.data();
      g.a_rows = k;
      g.a_cols = 1;
      g.b = b.data();
      g.b_rows = n;
      g.b_cols = 1;
      g.c_dtype = c_dtype;
      g.c = c_dtype == MIXRT_DTYPE_F32 ? static_cast<void*>(c32.data())
                                       : static_cast<void*>(c16.data());
      g.ldc = n;
      g.relu = relu;
      RunSmallGemmBf16(g);
      const auto at = [&](int64_t i) {
        return c_dtype == MIXRT_DTYPE_F32 ? c32[i] : sdk::BF16BitsToF32(c16[i]);
      };
      for (int64_t j = 0; j < n; ++j) {
        EXPECT_EQ(at(j), std::numeric_limits<float>::infinity()) << j;
        EXPECT_TRUE(std::isnan(at(n + j))) << j;
        EXPECT_TRUE(std::isnan(at(2 * n + j))) << j;
        EXPECT_EQ(at(3 * n + j), relu ? 0.0f : -2.0f) << j;
        EXPECT_FALSE(relu && std::signbit(at(3 * n + j))) << j;
      }
    }
  }
}

TEST(SmallGemmBf16, AppliesOnlyToSmallNonEmptyProducts) {
  if (!SmallGemmBf16Applies(1, 1, 1))
    GTEST_SKIP() << "no avx512_bf16 on this machine";
  EXPECT_TRUE(SmallGemmBf16Applies(64, 64, 64));
  EXPECT_FALSE(SmallGemmBf16Applies(64, 64, 65));
  EXPECT_FALSE(SmallGemmBf16Applies(0, 64, 64));
}

}  // namespace
}  // namespace mixrt::cpu
