// The CPU plugin's softmax row kernels (each implementation this CPU can
// run) against exp and max computed here in double: f32 weights within a
// few ulp, bf16 weights within bf16's unit roundoff, -inf to exactly 0,
// NaN kept, sums, and every tail length.
#include "backends/cpu/kernels/softmax_rows.h"

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "backends/cpu/capability/cpu_info.h"
#include "gtest/gtest.h"
#include "mixrt/float_convert.h"

namespace mixrt::cpu {
namespace {

std::vector<const SoftmaxRowKernels*> Implementations() {
  const CpuInfo& cpu = GetCpuInfo();
  std::vector<const SoftmaxRowKernels*> k = {&Avx2SoftmaxRows()};
  if (cpu.avx512) k.push_back(&Avx512SoftmaxRows());
  if (cpu.avx512 && cpu.avx512_bf16) k.push_back(&Avx512Bf16SoftmaxRows());
  return k;
}

// Scores in [-30, 5] with a few masked (-inf) entries.
std::vector<float> Scores(int n) {
  std::vector<float> x(n);
  uint32_t state = 12345;
  for (int j = 0; j < n; ++j) {
    state = state * 1664525u + 1013904223u;
    x[j] = -30.0f + 35.0f * static_cast<float>(state >> 8) / (1 << 24);
    if (j % 11 == 3) x[j] = -INFINITY;
  }
  return x;
}

TEST(SoftmaxRows, MaxMatchesAndNaNIsKept) {
  for (const SoftmaxRowKernels* k : Implementations()) {
    for (int n : {0, 1, 7, 8, 15, 16, 17, 40, 1000}) {
      std::vector<float> x = Scores(n);
      float want = -INFINITY;
      for (float v : x) want = std::max(want, v);
      EXPECT_EQ(k->row_max(x.data(), n), want) << k->isa << " n=" << n;
      if (n > 0) {
        for (int at : {0, n / 2, n - 1}) {
          std::vector<float> y = x;
          y[at] = NAN;
          EXPECT_TRUE(std::isnan(k->row_max(y.data(), n)))
              << k->isa << " n=" << n << " NaN at " << at;
        }
      }
    }
  }
}

TEST(SoftmaxRows, ExponentialsAndSumsMatchDouble) {
  const float shift = 4.5f, mult = 0.37f;
  for (const SoftmaxRowKernels* k : Implementations()) {
    for (int n : {1, 7, 8, 9, 16, 31, 33, 1000}) {
      const std::vector<float> x = Scores(n);
      std::vector<float> f32(n);
      std::vector<uint16_t> bf16(n);
      const float sum_f32 =
          k->exp_row_f32(x.data(), n, shift, mult, f32.data());
      const float sum_bf16 =
          k->exp_row_bf16(x.data(), n, shift, mult, bf16.data());
      double want_sum = 0;
      for (int j = 0; j < n; ++j) {
        // The argument is formed in f32, as the kernels are specified to;
        // exp of it in double is the reference.
        const float arg = (x[j] - shift) * mult;
        if (std::isinf(arg)) {  // A masked score: exactly 0.
          EXPECT_EQ(f32[j], 0.0f) << k->isa << " j=" << j;
          EXPECT_EQ(bf16[j], 0) << k->isa << " j=" << j;
          continue;
        }
        const double want = std::exp(double{arg});
        want_sum += want;
        // The polynomial is good to ~1e-7 relative, its f32 evaluation and
        // the result's rounding add a few 6e-8, and rounding arg * log2(e)
        // to f32 shifts the result by up to |arg| 2^-24 (x2 margin).
        const double rel = 3e-7 + std::abs(arg) * std::ldexp(1.0, -23);
        EXPECT_NEAR(f32[j], want, rel * want) << k->isa << " j=" << j;
        // bf16 keeps 8 significant bits: within its unit roundoff (2^-8,
        // relative) of the exact weight, plus the shorter polynomial's
        // error (degree 4: (ln2 / 2)^5 / 5! = 4.2e-5) and the argument's.
        const double b = sdk::BF16BitsToF32(bf16[j]);
        const double bf16_rel = std::ldexp(1.0, -8) + 4.2e-5 + rel;
        EXPECT_NEAR(b, want, want * bf16_rel) << k->isa << " j=" << j;
      }
      EXPECT_NEAR(sum_f32, want_sum, 1e-6 * want_sum) << k->isa << " n=" << n;
      // The bf16 kernel's sum is of its unrounded weights: the polynomial's
      // error only.
      EXPECT_NEAR(sum_bf16, want_sum, 5e-5 * want_sum) << k->isa << " n=" << n;
    }
  }
}

TEST(SoftmaxRows, NaNScoresReachTheSumAndTheF32Weights) {
  for (const SoftmaxRowKernels* k : Implementations()) {
    std::vector<float> x = Scores(40), out(40);
    x[21] = NAN;
    EXPECT_TRUE(
        std::isnan(k->exp_row_f32(x.data(), 40, 0.0f, 1.0f, out.data())))
        << k->isa;
    EXPECT_TRUE(std::isnan(out[21])) << k->isa;
    std::vector<uint16_t> low(40);
    EXPECT_TRUE(
        std::isnan(k->exp_row_bf16(x.data(), 40, 0.0f, 1.0f, low.data())))
        << k->isa;
  }
}

TEST(SoftmaxRows, ImplementationsAgreeBitForBitOnEachWeight) {
  const std::vector<float> x = Scores(1000);
  std::vector<float> want(1000), got(1000);
  Avx2SoftmaxRows().exp_row_f32(x.data(), 1000, 2.0f, 0.5f, want.data());
  for (const SoftmaxRowKernels* k : Implementations()) {
    k->exp_row_f32(x.data(), 1000, 2.0f, 0.5f, got.data());
    EXPECT_EQ(std::memcmp(got.data(), want.data(), 4000), 0) << k->isa;
  }
}

TEST(SoftmaxRows, ScaleRowMultipliesEveryElement) {
  for (const SoftmaxRowKernels* k : Implementations()) {
    for (int n : {0, 5, 16, 37}) {
      std::vector<float> x(n);
      for (int j = 0; j < n; ++j) x[j] = 0.25f * j - 3;
      k->scale_row(x.data(), n, 1.5f);
      for (int j = 0; j < n; ++j) EXPECT_EQ(x[j], (0.25f * j - 3) * 1.5f);
    }
  }
}

TEST(SoftmaxRows, TheChosenOneIsTheWidestTheCpuRuns) {
  const CpuInfo& cpu = GetCpuInfo();
  const char* want = !cpu.avx512       ? "avx2"
                     : cpu.avx512_bf16 ? "avx512_bf16"
                                       : "avx512";
  const char* cap = std::getenv("ONEDNN_MAX_CPU_ISA");
  if (cap != nullptr && std::string(cap) == "AVX2") want = "avx2";
  EXPECT_STREQ(SoftmaxRows().isa, want);
}

}  // namespace
}  // namespace mixrt::cpu
