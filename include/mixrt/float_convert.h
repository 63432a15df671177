// Bit-exact conversions between f32 and the 16-bit float formats.
//
// f32 -> f16/bf16 round to nearest, ties to even, the IEEE default and what
// hardware converters (vcvtps2ph, cvt.rn) do. Subnormals are produced and
// consumed exactly; overflow gives +-inf; NaN stays NaN with its sign and is
// quieted (the top mantissa bit set), as hardware does. The 16 -> 32 bit
// directions are exact.
//
//   uint16_t h = mixrt::sdk::F32ToF16Bits(1.0f / 3.0f);  // 0x3555
//   float f = mixrt::sdk::F16BitsToF32(h);                // 0.33325195
#ifndef MIXRT_FLOAT_CONVERT_H_
#define MIXRT_FLOAT_CONVERT_H_

#include <cstdint>
#include <cstring>

#include "mixrt/host_device.h"

namespace mixrt::sdk {

// Device compilers have bit-cast intrinsics; memcpy is the portable host way.
MIXRT_HOST_DEVICE inline uint32_t F32Bits(float f) {
#if MIXRT_DEVICE_PASS
  return __float_as_uint(f);
#else
  uint32_t u;
  std::memcpy(&u, &f, sizeof(u));
  return u;
#endif
}

MIXRT_HOST_DEVICE inline float F32FromBits(uint32_t u) {
#if MIXRT_DEVICE_PASS
  return __uint_as_float(u);
#else
  float f;
  std::memcpy(&f, &u, sizeof(f));
  return f;
#endif
}

// Rounds `value` right by `shift` bits, to nearest, ties to even.
MIXRT_HOST_DEVICE inline uint32_t ShiftRightRoundEven(uint32_t value,
                                                      uint32_t shift) {
  const uint32_t kept = value >> shift;
  const uint32_t rest = value & ((1u << shift) - 1u);
  const uint32_t half = 1u << (shift - 1u);
  return kept + ((rest > half || (rest == half && (kept & 1u))) ? 1u : 0u);
}

MIXRT_HOST_DEVICE inline uint16_t F32ToF16Bits(float f) {
  const uint32_t x = F32Bits(f);
  const uint32_t sign = (x >> 16) & 0x8000u;
  const uint32_t abs = x & 0x7fffffffu;
  if (abs > 0x7f800000u) {
    return static_cast<uint16_t>(sign | 0x7e00u | ((abs >> 13) & 0x3ffu));
  }
  // 65520 = 65504 + half an f16 ulp there: ties go to the even neighbour,
  // which is infinity because 65504's mantissa is odd.
  if (abs >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);
  if (abs < 0x38800000u) {  // Below 2^-14: an f16 subnormal or zero.
    // 2^-25 is the tie between 0 and the smallest subnormal: even is 0.
    if (abs <= 0x33000000u) return static_cast<uint16_t>(sign);
    const uint32_t exponent = abs >> 23;
    const uint32_t mantissa = (abs & 0x7fffffu) | 0x800000u;
    // value = mantissa * 2^(exponent - 150); in units of 2^-24 that is
    // mantissa >> (126 - exponent). A carry into bit 10 yields the smallest
    // normal, which is the correct encoding.
    return static_cast<uint16_t>(sign |
                                 ShiftRightRoundEven(mantissa, 126 - exponent));
  }
  // Normal: re-bias the exponent (127 - 15 = 112) and drop 13 mantissa bits.
  // A mantissa carry correctly bumps the exponent.
  return static_cast<uint16_t>(sign |
                               ShiftRightRoundEven(abs - (112u << 23), 13));
}

MIXRT_HOST_DEVICE inline float F16BitsToF32(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exponent = (h >> 10) & 0x1fu;
  uint32_t mantissa = h & 0x3ffu;
  if (exponent == 0x1fu) {
    return F32FromBits(sign | 0x7f800000u | (mantissa << 13));
  }
  if (exponent != 0) {
    return F32FromBits(sign | ((exponent + 112u) << 23) | (mantissa << 13));
  }
  if (mantissa == 0) return F32FromBits(sign);
  // Subnormal: normalize. The value is mantissa * 2^-24.
  int32_t e = 113;  // Biased f32 exponent of 2^-14.
  while ((mantissa & 0x400u) == 0) {
    mantissa <<= 1;
    --e;
  }
  return F32FromBits(sign | (static_cast<uint32_t>(e) << 23) |
                     ((mantissa & 0x3ffu) << 13));
}

MIXRT_HOST_DEVICE inline uint16_t F32ToBF16Bits(float f) {
  const uint32_t x = F32Bits(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) {
    return static_cast<uint16_t>((x >> 16) | 0x40u);
  }
  // bf16 is the top half of an f32; rounding the low half to even carries
  // into the exponent when needed, up to infinity.
  const uint32_t lsb = (x >> 16) & 1u;
  return static_cast<uint16_t>((x + 0x7fffu + lsb) >> 16);
}

MIXRT_HOST_DEVICE inline float BF16BitsToF32(uint16_t b) {
  return F32FromBits(static_cast<uint32_t>(b) << 16);
}

}  // namespace mixrt::sdk

#endif  // MIXRT_FLOAT_CONVERT_H_
