// Philox uniforms for runs of consecutive elements, eight blocks (32
// elements) per AVX2 step: random uniform and dropout spend most of their
// time here, and one block at a time (sdk::ForEachPhiloxUnit) is ~6x slower.
// The bits are sdk::PhiloxUniform's (the ABI's stream), element for element.
#ifndef MIXRT_BACKENDS_CPU_KERNELS_PHILOX_ROWS_H_
#define MIXRT_BACKENDS_CPU_KERNELS_PHILOX_ROWS_H_

#include <cstdint>

namespace mixrt::cpu {

// units[i] = the [0, 1) unit of element first + i of the stream (seed,
// offset), for i < n; exact in f32 (24 bits).
void PhiloxUnitsRow(uint64_t seed, uint64_t offset, uint64_t first, int64_t n,
                    float* units);

// In place: units[i] becomes `kept` where it is >= least_kept, else 0 (a
// vector compare; GCC kept the float select scalar and branched on it).
void KeepFactorsRow(float* units, int64_t n, float least_kept, float kept);

// factors[i] = 0 where element first + i's unit is below p (dropped), else
// 1 / (1 - p): sdk::AttentionDropoutRow's factors (its double compare,
// exactly), at PhiloxUnitsRow's speed.
void DropoutFactorsRow(uint64_t seed, uint64_t offset, uint64_t first,
                       int64_t n, double p, float* factors);

}  // namespace mixrt::cpu

#endif  // MIXRT_BACKENDS_CPU_KERNELS_PHILOX_ROWS_H_
