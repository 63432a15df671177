// The CPU plugin's small f32 products against products computed here in
// double from the same f32 values: f32 accumulation of k terms, so within
// k f32 ulps of the sum of magnitudes. Ragged sizes (rows past whole
// tiles, columns past whole vectors, depths past whole 8 x 8 transposes)
// must give exactly the valid products and write nothing past them. The
// AVX-512 tiles run where the CPU has them, the AVX2 tiles elsewhere (CI
// runs this test again with ONEDNN_MAX_CPU_ISA=AVX2, which turns the
// AVX-512 ones off).
#include "backends/cpu/gemm/small_gemm.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "backends/cpu/capability/cpu_info.h"
#include "gtest/gtest.h"
#include "tests/testing/uniform_floats.h"

namespace mixrt::cpu {
namespace {

using testing::UniformFloats;

// How b is laid out in memory.
enum class BLayout { kRowMajor, kTransposed, kStrided };

struct Case {
  int64_t m, n, k;
  BLayout b_layout;
  bool a_transposed;
  bool bias;
  int64_t bias_stride;
  float beta;
  bool relu = false;
};

void Check(const Case& t) {
  SCOPED_TRACE(::testing::Message()
               << "m " << t.m << " n " << t.n << " k " << t.k << " b layout "
               << static_cast<int>(t.b_layout) << " a transposed "
               << t.a_transposed << " bias " << t.bias << " stride "
               << t.bias_stride << " beta " << t.beta << " relu " << t.relu);
  ASSERT_TRUE(SmallGemmApplies(t.m, t.n, t.k));
  // Padded leading dimensions: reading or writing past a row shows.
  const int64_t pad = 3;
  const std::vector<float> a = UniformFloats((t.m + pad) * (t.k + pad), 1);
  const std::vector<float> b = UniformFloats(3 * (t.k + pad) * (t.n + pad), 2);
  const std::vector<float> bias = UniformFloats(t.n + 1, 3);
  const int64_t ldc = t.n + pad;
  std::vector<float> c = UniformFloats(t.m * ldc, 4);
  const std::vector<float> c_before = c;

  SmallGemm g;
  g.m = t.m;
  g.n = t.n;
  g.k = t.k;
  g.a = a.data();
  // a [m, k] row-major with row stride k + pad, or a^T stored [k, m].
  g.a_rows = t.a_transposed ? 1 : t.k + pad;
  g.a_cols = t.a_transposed ? t.m + pad : 1;
  g.b = b.data();
  switch (t.b_layout) {
    case BLayout::kRowMajor:  // [k, n], row stride n + pad.
      g.b_rows = t.n + pad;
      g.b_cols = 1;
      break;
    case BLayout::kTransposed:  // A Linear's weight [n, k] read as b = w^T.
      g.b_rows = 1;
      g.b_cols = t.k + pad;
      break;
    case BLayout::kStrided:  // Every third element of a row-major [k, 3n].
      g.b_rows = 3 * (t.n + pad);
      g.b_cols = 3;
      break;
  }
  g.c = c.data();
  g.ldc = ldc;
  g.bias = t.bias ? bias.data() : nullptr;
  g.bias_stride = t.bias_stride;
  g.beta = t.beta;
  g.relu = t.relu;
  RunSmallGemm(g);

  for (int64_t i = 0; i < t.m; ++i) {
    for (int64_t j = 0; j < ldc; ++j) {
      const float got = c[i * ldc + j];
      if (j >= t.n) {
        ASSERT_EQ(got, c_before[i * ldc + j]) << "wrote past row " << i;
        continue;
      }
      double want = 0, magnitudes = 0;
      for (int64_t p = 0; p < t.k; ++p) {
        const double x = a[i * g.a_rows + p * g.a_cols];
        const double y = b[p * g.b_rows + j * g.b_cols];
        want += x * y;
        magnitudes += std::fabs(x * y);
      }
      if (t.bias) {
        want += bias[j * t.bias_stride];
        magnitudes += std::fabs(bias[j * t.bias_stride]);
      }
      if (t.relu) want = std::max(want, 0.0);  // After the bias, before beta.
      if (t.beta != 0) {
        want += t.beta * c_before[i * ldc + j];
        magnitudes += std::fabs(t.beta * c_before[i * ldc + j]);
      }
      const double tolerance =
          magnitudes * static_cast<double>(t.k + 2) * std::ldexp(1.0, -24);
      ASSERT_NEAR(got, want, tolerance) << "c[" << i << ", " << j << "]";
    }
  }
}

TEST(SmallGemm, ProductsMatchDoubleOnRaggedShapesAndEveryLayout) {
  for (BLayout layout :
       {BLayout::kRowMajor, BLayout::kTransposed, BLayout::kStrided}) {
    for (const auto& [m, n, k] : std::vector<std::array<int64_t, 3>>{
             {32, 64, 64},  // The small MLP's layers.
             {32, 10, 64},
             {1, 1, 1},
             {7, 17, 9},    // A 7-row tile, one full and one 1-lane vector
                            // (AVX2: a 6-row tile and a 1-row one).
             {13, 33, 15},  // Two tiles and a 1-row one; 32 + 1 columns.
             {6, 16, 8},
             {5, 31, 23},
             {40, 70, 3},    // AVX2: 16 x 4 columns and 6 in one register.
             {9, 20, 5}}) {  // AVX2: 16 columns and a 4-lane register.
      for (bool a_transposed : {false, true}) {
        Check({m, n, k, layout, a_transposed, false, 1, 0});
      }
      Check({m, n, k, layout, false, true, 1, 0});
      Check({m, n, k, layout, false, true, 0, 0});  // One broadcast value.
      Check({m, n, k, layout, true, true, 1, 1.5f});
      Check({m, n, k, layout, false, false, 1, 1.0f});
      Check({m, n, k, layout, false, true, 1, 0, /*relu=*/true});
      Check({m, n, k, layout, true, false, 1, 0, /*relu=*/true});
      Check({m, n, k, layout, false, true, 1, 0.5f, /*relu=*/true});
    }
  }
}

// c [m, n] = a [m, k] x b [k, n], all dense and row-major.
SmallGemm RowMajor(int64_t m, int64_t n, int64_t k, const float* a,
                   const float* b, float* c) {
  SmallGemm g;
  g.m = m;
  g.n = n;
  g.k = k;
  g.a = a;
  g.a_rows = k;
  g.a_cols = 1;
  g.b = b;
  g.b_rows = n;
  g.b_cols = 1;
  g.c = c;
  g.ldc = n;
  return g;
}

TEST(SmallGemm, NonFiniteValuesPropagate) {
  // An overflowed activation must reach the GradScaler's check: inf times a
  // weight stays inf, inf - inf and 0 x inf give NaN, NaN stays NaN.
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const int64_t m = 3, n = 20, k = 2;
  // Rows of a: (inf, 1), (inf, -inf), (NaN, 0).
  const std::vector<float> a = {inf, 1, inf, -inf, nan, 0};
  std::vector<float> b(k * n, 1.0f);  // Every column (1, 1)...
  b[n + 5] = 0.0f;                    // ...but column 5: (1, 0).
  std::vector<float> c(m * n, 7.0f);
  RunSmallGemm(RowMajor(m, n, k, a.data(), b.data(), c.data()));
  for (int64_t j = 0; j < n; ++j) {
    EXPECT_EQ(c[j], inf) << j;               // Column 5: inf + 1 x 0.
    EXPECT_TRUE(std::isnan(c[n + j])) << j;  // inf - inf; inf + NaN at 5.
    EXPECT_TRUE(std::isnan(c[2 * n + j])) << j;
  }
}

TEST(SmallGemm, TheReluEpilogueKeepsNaNAndInfAndZeroesTheRest) {
  // The SDK's relu: NaN stays NaN (a fused epilogue must not hide an
  // overflow from the GradScaler, as oneDNN 2.6.3's relu post-op would),
  // inf stays, -inf, negatives and -0 become +0.
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const int64_t m = 6, n = 17, k = 1;
  const std::vector<float> a = {nan, inf, -inf, -2.0f, 3.0f, -0.0f};
  const std::vector<float> b(n, 1.0f);
  std::vector<float> c(m * n, 7.0f);
  SmallGemm g = RowMajor(m, n, k, a.data(), b.data(), c.data());
  g.relu = true;
  RunSmallGemm(g);
  for (int64_t j = 0; j < n; ++j) {
    EXPECT_TRUE(std::isnan(c[j])) << j;
    EXPECT_EQ(c[n + j], inf) << j;
    for (int64_t i : {2, 3, 5}) {
      EXPECT_EQ(c[i * n + j], 0.0f) << i << ", " << j;
      EXPECT_FALSE(std::signbit(c[i * n + j])) << i << ", " << j;
    }
    EXPECT_EQ(c[4 * n + j], 3.0f) << j;
  }
}

TEST(SmallGemm, AppliesOnlyToSmallNonEmptyProducts) {
  EXPECT_TRUE(SmallGemmApplies(64, 64, 64));
  EXPECT_FALSE(SmallGemmApplies(64, 64, 65));
  EXPECT_FALSE(SmallGemmApplies(0, 64, 64));
  EXPECT_FALSE(SmallGemmApplies(64, 64, 0));
}

}  // namespace
}  // namespace mixrt::cpu
