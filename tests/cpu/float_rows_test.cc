// The CPU plugin's row stores round exactly as the SDK's scalar
// conversions (nearest even; a NaN stays a quiet NaN with its sign and top
// payload; subnormals kept), whichever instructions this CPU gives them:
// avx512_bf16's vcvtneps2bf16 flushes subnormal inputs, so vectors holding
// one must take the integer path. Every 32-bit pattern class comes up
// among random bits (1 in 256 is subnormal, 1 in 256 is inf or NaN).
#include "backends/cpu/kernels/float_rows.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "gtest/gtest.h"
#include "mixrt/float_convert.h"

namespace mixrt::cpu {
namespace {

std::vector<float> RandomBitPatterns(int64_t n, uint32_t seed) {
  std::vector<float> v(n);
  for (int64_t i = 0; i < n; ++i) {
    seed = seed * 1664525u + 1013904223u;
    const uint32_t bits = seed ^ (seed >> 13);
    std::memcpy(&v[i], &bits, 4);
  }
  return v;
}

void ExpectBf16Exact(const std::vector<float>& x, int64_t offset) {
  std::vector<uint16_t> out(x.size() + offset, 0xabcd);
  StoreRow(x.data(), static_cast<int64_t>(x.size()), out.data(),
           MIXRT_DTYPE_BF16, offset);
  for (int64_t i = 0; i < offset; ++i)
    ASSERT_EQ(out[i], 0xabcd) << "wrote before " << i;
  for (size_t i = 0; i < x.size(); ++i) {
    uint32_t bits;
    std::memcpy(&bits, &x[i], 4);
    ASSERT_EQ(out[offset + i], sdk::F32ToBF16Bits(x[i]))
        << "element " << i << " bits 0x" << std::hex << bits;
  }
}

TEST(FloatRows, Bf16StoresRoundAsTheSdkOnEveryBitPattern) {
  // Lengths past whole 16- and 8-lane vectors, and an odd offset.
  for (int64_t n : {1, 7, 8, 15, 16, 17, 31, 1000, 1 << 16}) {
    ExpectBf16Exact(RandomBitPatterns(n, static_cast<uint32_t>(n)), n % 2);
  }
}

TEST(FloatRows, OneSubnormalAmongNormalsKeepsItsBits) {
  const float tiny = 1e-39f;  // Subnormal in f32 and in bf16.
  for (int at = 0; at < 16; ++at) {
    std::vector<float> x(32, 1.5f);
    x[at] = tiny;
    x[16 + at] = -tiny;
    ExpectBf16Exact(x, 0);
    std::vector<uint16_t> out(32);
    StoreRow(x.data(), 32, out.data(), MIXRT_DTYPE_BF16, 0);
    EXPECT_NE(out[at], 0) << "a subnormal flushed to zero at " << at;
  }
}

TEST(FloatRows, F16StoresRoundAsTheSdkOnEveryBitPattern) {
  const std::vector<float> x = RandomBitPatterns(1 << 16, 7);
  std::vector<uint16_t> out(x.size());
  StoreRow(x.data(), static_cast<int64_t>(x.size()), out.data(),
           MIXRT_DTYPE_F16, 0);
  for (size_t i = 0; i < x.size(); ++i) {
    if (std::isnan(x[i])) {  // Any quiet NaN: F16C keeps fewer payload bits.
      ASSERT_TRUE(std::isnan(sdk::F16BitsToF32(out[i]))) << i;
      continue;
    }
    ASSERT_EQ(out[i], sdk::F32ToF16Bits(x[i])) << i;
  }
}

TEST(FloatRows, RoundingInPlaceIsAStoreAndALoad) {
  for (MixrtDtype dtype :
       {MIXRT_DTYPE_BF16, MIXRT_DTYPE_F16, MIXRT_DTYPE_F32}) {
    for (int64_t n : {1, 7, 8, 9, 300, 1 << 16}) {
      const std::vector<float> x =
          RandomBitPatterns(n, static_cast<uint32_t>(n + dtype));
      std::vector<uint16_t> narrow(n);
      std::vector<float> want(n), got = x;
      if (dtype == MIXRT_DTYPE_F32) {
        want = x;
      } else {
        StoreRow(x.data(), n, narrow.data(), dtype, 0);
        LoadRow(narrow.data(), dtype, 0, n, want.data());
      }
      RoundRowInPlace(got.data(), n, dtype);
      for (int64_t i = 0; i < n; ++i) {
        uint32_t a, b;
        std::memcpy(&a, &got[i], 4);
        std::memcpy(&b, &want[i], 4);
        ASSERT_EQ(a, b) << "dtype " << dtype << " element " << i;
      }
    }
  }
}

}  // namespace
}  // namespace mixrt::cpu
