// The MPI plugin's vectorized 16-bit reductions against the SDK's scalar
// conversions (tests/float_convert_test checks those against the hardware
// converters): every bf16 and f16 bit pattern, bit for bit.
#include "backends/mpi/sixteen_bit_reduce.h"

#include <cstdint>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "mixrt/float_convert.h"

namespace mixrt::mpi {
namespace {

using sdk::BF16BitsToF32;
using sdk::F16BitsToF32;
using sdk::F32ToBF16Bits;
using sdk::F32ToF16Bits;

float ToF32(Float16Kind kind, uint16_t bits) {
  return kind == Float16Kind::kBF16 ? BF16BitsToF32(bits) : F16BitsToF32(bits);
}
uint16_t FromF32(Float16Kind kind, float value) {
  return kind == Float16Kind::kBF16 ? F32ToBF16Bits(value)
                                    : F32ToF16Bits(value);
}

// Every pattern as `inout`; as `in`, a fixed special value or a scrambled
// partner (an odd multiplier permutes 0..65535), so each pattern meets
// zeros, infinities, NaNs, extremes and ordinary values.
std::vector<std::vector<uint16_t>> Partners(Float16Kind kind) {
  const bool bf16 = kind == Float16Kind::kBF16;
  const uint16_t specials[] = {
      0x0000,
      0x8000,                                      // +-0
      bf16 ? uint16_t{0x7f80} : uint16_t{0x7c00},  // inf
      bf16 ? uint16_t{0xff80} : uint16_t{0xfc00},  // -inf
      bf16 ? uint16_t{0x7fc1} : uint16_t{0x7e01},  // a quiet NaN
      bf16 ? uint16_t{0x7f81} : uint16_t{0x7c01},  // a signalling NaN
      bf16 ? uint16_t{0x7f7f} : uint16_t{0x7bff},  // the largest finite
      0x0001,                                      // the smallest subnormal
      bf16 ? uint16_t{0x3f80} : uint16_t{0x3c00},  // 1
  };
  std::vector<std::vector<uint16_t>> partners;
  for (uint16_t s : specials) partners.emplace_back(65536, s);
  for (uint32_t multiplier : {40503u, 12345u, 1u}) {
    std::vector<uint16_t> p(65536);
    for (uint32_t i = 0; i < 65536; ++i) {
      p[i] = static_cast<uint16_t>(i * multiplier + 7);
    }
    partners.push_back(p);
  }
  return partners;
}

std::vector<uint16_t> AllPatterns() {
  std::vector<uint16_t> all(65536);
  for (uint32_t i = 0; i < 65536; ++i) all[i] = static_cast<uint16_t>(i);
  return all;
}

class SixteenBitReduceTest : public testing::TestWithParam<Float16Kind> {
 protected:
  // Bit for bit, except that a NaN result (among the first n, the ones
  // computed) need only be a quiet NaN: which operand's payload an f32 add
  // of two NaNs keeps is left open by IEEE 754, and x86 keeps the first,
  // whose place the compiler may swap. Elements from n on stay untouched.
  void ExpectSameBits(const std::vector<uint16_t>& got,
                      const std::vector<uint16_t>& want, size_t n,
                      const std::string& what) {
    const Float16Kind kind = GetParam();
    const uint16_t quiet_bit = kind == Float16Kind::kBF16 ? 0x40 : 0x200;
    for (size_t i = 0; i < got.size(); ++i) {
      const float w = ToF32(kind, want[i]);
      if (i < n && w != w) {
        ASSERT_TRUE(ToF32(kind, got[i]) != ToF32(kind, got[i]) &&
                    (got[i] & quiet_bit) != 0)
            << what << " element " << i << ": " << got[i]
            << " is not a quiet NaN";
        continue;
      }
      ASSERT_EQ(got[i], want[i]) << what << " element " << i;
    }
  }
};

TEST_P(SixteenBitReduceTest, SumIsTheF32SumRoundedOnce) {
  const Float16Kind kind = GetParam();
  for (const auto& in : Partners(kind)) {
    for (size_t n : {size_t{65536}, size_t{13}}) {
      std::vector<uint16_t> inout = AllPatterns(), want = AllPatterns();
      for (size_t i = 0; i < n; ++i) {
        want[i] = FromF32(kind, ToF32(kind, in[i]) + ToF32(kind, want[i]));
      }
      SumInto16(kind, in.data(), inout.data(), n);
      ExpectSameBits(inout, want, n, "sum, partner " + std::to_string(in[0]));
    }
  }
}

TEST_P(SixteenBitReduceTest, MaxLetsNaNWin) {
  const Float16Kind kind = GetParam();
  for (const auto& in : Partners(kind)) {
    for (size_t n : {size_t{65536}, size_t{21}}) {
      std::vector<uint16_t> inout = AllPatterns(), want = AllPatterns();
      for (size_t i = 0; i < n; ++i) {
        const float x = ToF32(kind, in[i]), y = ToF32(kind, want[i]);
        want[i] = FromF32(kind, (x != x || x > y) ? x : y);
      }
      MaxInto16(kind, in.data(), inout.data(), n);
      ExpectSameBits(inout, want, n, "max, partner " + std::to_string(in[0]));
    }
  }
}

TEST_P(SixteenBitReduceTest, DivideRoundsOnce) {
  const Float16Kind kind = GetParam();
  for (float divisor : {2.0f, 3.0f, 7.0f}) {
    for (size_t n : {size_t{65536}, size_t{5}}) {
      std::vector<uint16_t> data = AllPatterns(), want = AllPatterns();
      for (size_t i = 0; i < n; ++i) {
        want[i] = FromF32(kind, ToF32(kind, want[i]) / divisor);
      }
      Divide16(kind, data.data(), n, divisor);
      ExpectSameBits(data, want, n, "divide by " + std::to_string(divisor));
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Formats, SixteenBitReduceTest,
                         testing::Values(Float16Kind::kBF16, Float16Kind::kF16),
                         [](const auto& info) {
                           return info.param == Float16Kind::kBF16 ? "bf16"
                                                                   : "f16";
                         });

}  // namespace
}  // namespace mixrt::mpi
