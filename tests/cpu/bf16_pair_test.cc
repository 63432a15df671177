// Splitting floats into bf16 pairs (the CPU plugin's f16 matmul on AMX):
// every one of the 63,488 finite f16 values splits exactly (hi + lo == x,
// both bf16, hi the nearest bf16), infinities and NaN keep lo = 0, in every
// position of a vector and its scalar tail; and a split reports whether all
// of its values were finite.
#include "backends/cpu/kernels/bf16_pair.h"

#include <cmath>
#include <cstdint>
#include <vector>

#include "gtest/gtest.h"
#include "mixrt/float_convert.h"

namespace mixrt::cpu {
namespace {

TEST(Bf16Pairs, EveryF16ValueSplitsExactly) {
  std::vector<float> x;
  for (uint32_t bits = 0; bits < 0x10000; ++bits) {
    x.push_back(sdk::F16BitsToF32(static_cast<uint16_t>(bits)));
  }
  x.push_back(1.0f);  // 65537 values: a tail after the 16-lane loop.
  std::vector<uint16_t> hi(x.size()), lo(x.size());
  // Infinities and NaN among them: reported.
  EXPECT_FALSE(SplitIntoBf16Pairs(x.data(), static_cast<int64_t>(x.size()),
                                  hi.data(), lo.data()));
  for (size_t i = 0; i < x.size(); ++i) {
    const float h = sdk::BF16BitsToF32(hi[i]), l = sdk::BF16BitsToF32(lo[i]);
    if (std::isnan(x[i])) {
      EXPECT_TRUE(std::isnan(h)) << i;
      EXPECT_EQ(l, 0.0f) << i;
    } else if (std::isinf(x[i])) {
      EXPECT_EQ(h, x[i]) << i;
      EXPECT_EQ(l, 0.0f) << i;
    } else {
      ASSERT_EQ(hi[i], sdk::F32ToBF16Bits(x[i])) << "f16 bits " << i;
      // Exact in double; hi + lo == x with no rounding.
      ASSERT_EQ(static_cast<double>(h) + static_cast<double>(l),
                static_cast<double>(x[i]))
          << "f16 bits " << i;
    }
  }
}

TEST(Bf16Pairs, ReportsWhetherEveryValueWasFinite) {
  for (int n : {5, 16, 37}) {  // Tail only, vector only, both.
    std::vector<float> x(n, 0.75f);
    std::vector<uint16_t> hi(n), lo(n);
    EXPECT_TRUE(SplitIntoBf16Pairs(x.data(), n, hi.data(), lo.data())) << n;
    for (int at : {0, n - 1}) {
      for (float bad : {INFINITY, -INFINITY, NAN}) {
        std::vector<float> y = x;
        y[at] = bad;
        EXPECT_FALSE(SplitIntoBf16Pairs(y.data(), n, hi.data(), lo.data()))
            << n << " " << at << " " << bad;
      }
    }
  }
}

}  // namespace
}  // namespace mixrt::cpu
