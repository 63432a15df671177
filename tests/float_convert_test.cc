// Checks of plugins/sdk/float_convert.h: f32 bit patterns into f16 and
// bf16, and every 2^16 pattern back. The reference here is a separate
// algorithm: round in double arithmetic (frexp/ldexp/nearbyint under the
// default round-to-nearest-even mode) and decode 16-bit patterns from their
// IEEE definition. Built twice: float_convert_exhaustive_test walks all
// 2^32 patterns (9 CPU-minutes on an AVX2 machine: tagged manual, run it
// when float_convert.h changes); float_convert_test, in every test run,
// walks every FLOAT_CONVERT_STRIDE-th pattern and, around each, the
// patterns at and beside both formats' rounding points (ties included).
#include "mixrt/float_convert.h"

#include <cfenv>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "gtest/gtest.h"

namespace mixrt::sdk {
namespace {

struct Format {
  int mantissa_bits;  // Stored bits: 10 for f16, 7 for bf16.
  int min_exponent;   // Exponent of the smallest normal: -14, -126.
  int max_exponent;   // 15, 127.
};

constexpr Format kF16 = {10, -14, 15};
constexpr Format kBF16 = {7, -126, 127};

// `value` rounded to the format, as a double (+-inf on overflow).
double RoundReference(double value, const Format& f) {
  const double a = std::fabs(value);
  const double largest =
      std::ldexp(2.0 - std::ldexp(1.0, -f.mantissa_bits), f.max_exponent);
  const double half_ulp_above =
      std::ldexp(std::ldexp(1.0, -f.mantissa_bits - 1), f.max_exponent);
  if (a >= largest + half_ulp_above) {
    // At exactly the midpoint, ties-to-even picks infinity: the largest
    // finite value has an odd (all ones) mantissa.
    return std::copysign(std::numeric_limits<double>::infinity(), value);
  }
  int e = 0;
  std::frexp(a, &e);  // a = m * 2^e, m in [0.5, 1)
  const int exponent = std::max(e - 1, f.min_exponent);
  const double ulp = std::ldexp(1.0, exponent - f.mantissa_bits);
  return std::copysign(std::nearbyint(a / ulp) * ulp, value);
}

double DecodeReference(uint16_t bits, const Format& f) {
  const int exponent_bits = 15 - f.mantissa_bits;
  const int bias = (1 << (exponent_bits - 1)) - 1;
  const bool negative = (bits >> 15) != 0;
  const int e = (bits >> f.mantissa_bits) & ((1 << exponent_bits) - 1);
  const int m = bits & ((1 << f.mantissa_bits) - 1);
  double magnitude;
  if (e == (1 << exponent_bits) - 1) {
    magnitude = m == 0 ? std::numeric_limits<double>::infinity()
                       : std::numeric_limits<double>::quiet_NaN();
  } else if (e == 0) {
    magnitude = std::ldexp(m, 1 - bias - f.mantissa_bits);
  } else {
    magnitude =
        std::ldexp(m + (1 << f.mantissa_bits), e - bias - f.mantissa_bits);
  }
  return negative ? -magnitude : magnitude;
}

constexpr int kChunks = 64;

#ifndef FLOAT_CONVERT_STRIDE
#define FLOAT_CONVERT_STRIDE 1
#endif
constexpr uint64_t kStride = FLOAT_CONVERT_STRIDE;

// With a stride, the patterns beside `u` where rounding decides: its high
// part with each format's dropped bits at the halfway point and one below
// and above (bf16 drops 16 bits, a normal f16 13).
std::vector<uint64_t> RoundingNeighbours(uint64_t u) {
  std::vector<uint64_t> out;
  for (const uint64_t dropped : {uint64_t{16}, uint64_t{13}}) {
    const uint64_t half = uint64_t{1} << (dropped - 1);
    const uint64_t high = u & ~((uint64_t{1} << dropped) - 1);
    for (const uint64_t low : {half - 1, half, half + 1})
      out.push_back(high | low);
  }
  return out;
}

class ExhaustiveF32To16 : public ::testing::TestWithParam<int> {};

template <typename Convert>
void CheckChunk(int chunk, const Format& format, Convert convert,
                const char* name) {
  ASSERT_EQ(std::fegetround(), FE_TONEAREST);
  const uint64_t begin = (uint64_t{1} << 32) / kChunks * chunk;
  const uint64_t end = (uint64_t{1} << 32) / kChunks * (chunk + 1);
  int failures = 0;
  std::vector<uint64_t> patterns;
  for (uint64_t next = begin; next < end && failures < 10; next += kStride) {
    patterns = {next};
    if (kStride > 1) {
      for (uint64_t n : RoundingNeighbours(next)) patterns.push_back(n);
    }
    for (const uint64_t u : patterns) {
      const float f = F32FromBits(static_cast<uint32_t>(u));
      const uint16_t got = convert(f);
      const double decoded = DecodeReference(got, format);
      if (std::isnan(f)) {
        // NaN stays NaN, keeps its sign and comes out quiet.
        const bool quiet = (got >> (format.mantissa_bits - 1)) & 1;
        if (!std::isnan(decoded) || std::signbit(decoded) != std::signbit(f) ||
            !quiet) {
          ADD_FAILURE() << name << "(NaN 0x" << std::hex << u << ") = 0x"
                        << got;
          ++failures;
        }
        continue;
      }
      const double want = RoundReference(f, format);
      if (decoded != want || std::signbit(decoded) != std::signbit(want)) {
        ADD_FAILURE() << name << "(bits 0x" << std::hex << u << " = "
                      << std::defaultfloat << f << ") gave 0x" << std::hex
                      << got << " = " << std::defaultfloat << decoded
                      << ", expected " << want;
        ++failures;
      }
    }
  }
}

TEST_P(ExhaustiveF32To16, F16MatchesDoubleRounding) {
  CheckChunk(GetParam(), kF16, F32ToF16Bits, "F32ToF16Bits");
}

TEST_P(ExhaustiveF32To16, BF16MatchesDoubleRounding) {
  CheckChunk(GetParam(), kBF16, F32ToBF16Bits, "F32ToBF16Bits");
}

INSTANTIATE_TEST_SUITE_P(AllF32BitPatterns, ExhaustiveF32To16,
                         ::testing::Range(0, kChunks));

template <typename Widen>
void CheckAll16(const Format& format, Widen widen, const char* name) {
  for (uint32_t h = 0; h < 65536; ++h) {
    const float got = widen(static_cast<uint16_t>(h));
    const double want = DecodeReference(static_cast<uint16_t>(h), format);
    if (std::isnan(want)) {
      ASSERT_TRUE(std::isnan(got)) << name << "(0x" << std::hex << h << ")";
      ASSERT_EQ(std::signbit(got), std::signbit(want));
      // The payload is kept in the top mantissa bits.
      const uint32_t payload = F32Bits(got) & 0x7fffffu;
      ASSERT_EQ(payload >> (23 - format.mantissa_bits),
                h & ((1u << format.mantissa_bits) - 1));
      continue;
    }
    ASSERT_EQ(static_cast<double>(got), want)
        << name << "(0x" << std::hex << h << ")";
    ASSERT_EQ(std::signbit(got), std::signbit(want));
  }
}

TEST(Exhaustive16To32, F16IsExact) { CheckAll16(kF16, F16BitsToF32, "F16"); }
TEST(Exhaustive16To32, BF16IsExact) {
  CheckAll16(kBF16, BF16BitsToF32, "BF16");
}

TEST(RoundTrip, EveryF16AndBF16SurvivesF32) {
  for (uint32_t h = 0; h < 65536; ++h) {
    const auto bits = static_cast<uint16_t>(h);
    const bool f16_nan = (h & 0x7c00u) == 0x7c00u && (h & 0x3ffu) != 0;
    if (!f16_nan) {
      ASSERT_EQ(F32ToF16Bits(F16BitsToF32(bits)), bits) << std::hex << h;
    }
    const bool bf16_nan = (h & 0x7f80u) == 0x7f80u && (h & 0x7fu) != 0;
    if (!bf16_nan) {
      ASSERT_EQ(F32ToBF16Bits(BF16BitsToF32(bits)), bits) << std::hex << h;
    }
  }
}

// Named corner cases, so a failure reads as what broke.
TEST(Corners, KnownValues) {
  EXPECT_EQ(F32ToF16Bits(65504.0f), 0x7bffu);    // Largest f16.
  EXPECT_EQ(F32ToF16Bits(65519.996f), 0x7bffu);  // Below the midpoint.
  EXPECT_EQ(F32ToF16Bits(65520.0f), 0x7c00u);    // Midpoint: to inf.
  EXPECT_EQ(F32ToF16Bits(std::ldexp(1.0f, -24)), 0x0001u);  // Min subnormal.
  EXPECT_EQ(F32ToF16Bits(std::ldexp(1.0f, -25)), 0x0000u);  // Tie to even 0.
  EXPECT_EQ(F32ToF16Bits(std::ldexp(1.5f, -25)), 0x0001u);
  EXPECT_EQ(F32ToF16Bits(-0.0f), 0x8000u);
  EXPECT_EQ(F32ToF16Bits(1.0f + std::ldexp(1.0f, -11)), 0x3c00u);  // Tie even.
  EXPECT_EQ(F32ToF16Bits(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3c02u);
  EXPECT_EQ(F32ToBF16Bits(1.0f + std::ldexp(1.0f, -8)), 0x3f80u);  // Tie even.
  EXPECT_EQ(F32ToBF16Bits(3.4028235e38f), 0x7f80u);  // f32 max rounds to inf.
  EXPECT_EQ(F32ToBF16Bits(std::ldexp(1.0f, -149)), 0x0000u);  // Far below.
  EXPECT_EQ(F32ToBF16Bits(std::ldexp(1.0f, -134)), 0x0000u);  // Tie to 0.
  EXPECT_EQ(F32ToBF16Bits(std::ldexp(3.0f, -135)), 0x0001u);
}

}  // namespace
}  // namespace mixrt::sdk
