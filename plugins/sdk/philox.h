// Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2,
// 3", SC'11): a counter-based generator, so element i of a random tensor is a
// pure function of (seed, offset, i) and every plugin produces the same bits.
// The mapping to uniform and normal values is specified in plugin_api.h
// (MixrtRandomAttrs); this header implements it.
#ifndef MIXRT_PLUGINS_SDK_PHILOX_H_
#define MIXRT_PLUGINS_SDK_PHILOX_H_

#include <array>
#include <cmath>
#include <cstdint>

#include "mixrt/host_device.h"

namespace mixrt::sdk {

using PhiloxBlock = std::array<uint32_t, 4>;

// The round multipliers and key increments (vectorized implementations use
// them too).
inline constexpr uint32_t kPhiloxMul0 = 0xD2511F53u;
inline constexpr uint32_t kPhiloxMul1 = 0xCD9E8D57u;
inline constexpr uint32_t kPhiloxWeyl0 = 0x9E3779B9u;
inline constexpr uint32_t kPhiloxWeyl1 = 0xBB67AE85u;

MIXRT_HOST_DEVICE inline PhiloxBlock Philox4x32(uint64_t counter,
                                                uint64_t seed) {
  PhiloxBlock c = {static_cast<uint32_t>(counter),
                   static_cast<uint32_t>(counter >> 32), 0u, 0u};
  uint32_t k0 = static_cast<uint32_t>(seed);
  uint32_t k1 = static_cast<uint32_t>(seed >> 32);
  for (int round = 0; round < 10; ++round) {
    const uint64_t p0 = static_cast<uint64_t>(kPhiloxMul0) * c[0];
    const uint64_t p1 = static_cast<uint64_t>(kPhiloxMul1) * c[2];
    c = {static_cast<uint32_t>(p1 >> 32) ^ c[1] ^ k0, static_cast<uint32_t>(p1),
         static_cast<uint32_t>(p0 >> 32) ^ c[3] ^ k1,
         static_cast<uint32_t>(p0)};
    k0 += kPhiloxWeyl0;
    k1 += kPhiloxWeyl1;
  }
  return c;
}

// 24 random bits scaled into [0, 1): exactly representable in f32.
MIXRT_HOST_DEVICE inline double PhiloxUnit(uint32_t word) {
  return static_cast<double>(word >> 8) * (1.0 / 16777216.0);
}

// Word i of a block, selected without indexing the array by a variable
// (which would put the block in a GPU thread's local memory).
MIXRT_HOST_DEVICE inline uint32_t PhiloxWord(const PhiloxBlock& block,
                                             uint64_t i) {
  return i == 0 ? block[0] : i == 1 ? block[1] : i == 2 ? block[2] : block[3];
}

// Element `index` of a U[low, high) tensor.
MIXRT_HOST_DEVICE inline double PhiloxUniform(uint64_t seed, uint64_t offset,
                                              uint64_t index, double low,
                                              double high) {
  const PhiloxBlock block = Philox4x32(index / 4 + offset, seed);
  return low + (high - low) * PhiloxUnit(PhiloxWord(block, index % 4));
}

// fn(i, PhiloxUnit of element first + i) for i in [0, n): the unit values
// PhiloxUniform maps, each block computed once for its four consecutive
// elements (element by element, every block is computed four times).
template <typename Fn>
MIXRT_HOST_DEVICE inline void ForEachPhiloxUnit(uint64_t seed, uint64_t offset,
                                                uint64_t first, int64_t n,
                                                Fn&& fn) {
  PhiloxBlock block{};
  for (int64_t i = 0; i < n; ++i) {
    const uint64_t index = first + static_cast<uint64_t>(i);
    if (i == 0 || index % 4 == 0) block = Philox4x32(index / 4 + offset, seed);
    fn(i, PhiloxUnit(PhiloxWord(block, index % 4)));
  }
}

// Whether MIXRT_OP_DROPOUT keeps the element whose uniform is `unit`: the
// f32 comparison that random uniform, compare and where compose (unit is
// exact in f32; comparing with p in double would differ where p rounds).
MIXRT_HOST_DEVICE inline bool DropoutKeeps(double unit, double p) {
  return static_cast<float>(unit) >= static_cast<float>(p);
}

// Element `index` of a N(mean, std^2) tensor (Box-Muller on word pairs).
MIXRT_HOST_DEVICE inline double PhiloxNormal(uint64_t seed, uint64_t offset,
                                             uint64_t index, double mean,
                                             double std) {
  constexpr double kTwoPi = 6.283185307179586476925286766559;
  const PhiloxBlock block = Philox4x32(index / 4 + offset, seed);
  const uint64_t pair = (index % 4) & ~uint64_t{1};
  const double u1 = 1.0 - PhiloxUnit(PhiloxWord(block, pair));
  const double u2 = PhiloxUnit(PhiloxWord(block, pair + 1));
  const double r = std::sqrt(-2.0 * std::log(u1));
  const double z =
      (index % 2 == 0) ? r * std::cos(kTwoPi * u2) : r * std::sin(kTwoPi * u2);
  return mean + std * z;
}

}  // namespace mixrt::sdk

#endif  // MIXRT_PLUGINS_SDK_PHILOX_H_
