// The CPU plugin's AVX-512 f32 attention GEMMs against products computed
// here in double from the same f32 values: f32 accumulation of `depth`
// terms, so within depth f32 ulps of the sum of magnitudes. Ragged sizes
// (rows and keys not multiples of the tiles, a last panel with padding
// keys) must give exactly the valid products and write nothing past them.
// Skipped where the CPU has no AVX-512 (the attention's oneDNN path runs
// there, and the conformance suite covers both).
#include "backends/cpu/gemm/f32_tiles.h"

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <vector>

#include "gtest/gtest.h"
#include "tests/testing/uniform_floats.h"

namespace mixrt::cpu {
namespace {

using testing::UniformFloats;

double Tolerance(double magnitudes, int64_t terms) {
  return magnitudes * static_cast<double>(terms) * std::ldexp(1.0, -24) + 1e-30;
}

TEST(F32Tiles, TimesPanelsIsRowsTimesKeysTransposed) {
  if (!F32TilesUsable()) GTEST_SKIP() << "no AVX-512 on this machine";
  // 29 rows (two 12-row tiles and a 5-row rest); keys 0..1099 with the
  // last chunk [512, 1100): 18 panels, the last with 20 padding keys.
  for (int64_t depth : {16, 64, 80}) {
    const int64_t rows = 29, keys = 1100, j0 = 512, cols = keys - j0;
    const int64_t lda = depth + 3, ld = depth + 1, ldc = cols + 7;
    const std::vector<float> a = UniformFloats(rows * lda, 1);
    const std::vector<float> k = UniformFloats(keys * ld, 2);
    std::vector<float> panels(F32PanelKeys(keys) * depth);
    F32PackPanels(k.data(), keys, depth, ld, panels.data());
    std::vector<float> c(rows * ldc, NAN);
    F32TimesPanels(a.data(), rows, depth, lda, panels.data() + j0 * depth, cols,
                   c.data(), ldc);
    for (int64_t i = 0; i < rows; ++i) {
      for (int64_t j = 0; j < ldc; ++j) {
        const float got = c[i * ldc + j];
        if (j >= cols) {
          ASSERT_TRUE(std::isnan(got))
              << "wrote past the chunk at " << i << "," << j;
          continue;
        }
        double want = 0, mag = 0;
        for (int64_t t = 0; t < depth; ++t) {
          const double p = double{a[i * lda + t]} * k[(j0 + j) * ld + t];
          want += p;
          mag += std::abs(p);
        }
        ASSERT_NEAR(got, want, Tolerance(mag, depth))
            << "depth " << depth << " row " << i << " key " << j0 + j;
      }
    }
  }
}

TEST(F32Tiles, AccumulateTransposedTimesAddsATransposedB) {
  if (!F32TilesUsable()) GTEST_SKIP() << "no AVX-512 on this machine";
  // m = 515 (85 six-row tiles and a 5-row rest), n = 64, 112 (4 + 3
  // vectors) and 16, depth 37, leading dimensions wider than the rows.
  for (int64_t n : {16, 64, 112}) {
    const int64_t m = 515, depth = 37, lda = m + 5, ldb = n + 16, ldc = n + 3;
    const std::vector<float> a = UniformFloats(depth * lda, 3);
    const std::vector<float> b = UniformFloats(depth * ldb, 4);
    const std::vector<float> c0 = UniformFloats(m * ldc, 5);
    std::vector<float> c = c0;
    F32AccumulateTransposedTimes(a.data(), m, depth, lda, b.data(), n, ldb,
                                 c.data(), ldc);
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t j = 0; j < ldc; ++j) {
        if (j >= n) {
          ASSERT_EQ(c[i * ldc + j], c0[i * ldc + j])
              << "wrote past column " << n;
          continue;
        }
        double want = c0[i * ldc + j], mag = std::abs(want);
        for (int64_t t = 0; t < depth; ++t) {
          const double p = double{a[t * lda + i]} * b[t * ldb + j];
          want += p;
          mag += std::abs(p);
        }
        ASSERT_NEAR(c[i * ldc + j], want, Tolerance(mag, depth + 1))
            << "n " << n << " at " << i << "," << j;
      }
    }
  }
}

// Run with ONEDNN_MAX_CPU_ISA at AVX2 (MIXRT_EXPECT_NO_AVX512 set): the cap
// that keeps oneDNN off AVX-512 keeps these kernels off it too.
TEST(F32Tiles, TheOneDnnIsaCapTurnsThemOff) {
  if (std::getenv("MIXRT_EXPECT_NO_AVX512") == nullptr) {
    GTEST_SKIP() << "runs in the capped variant";
  }
  EXPECT_FALSE(F32TilesUsable());
}

}  // namespace
}  // namespace mixrt::cpu
