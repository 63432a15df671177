// A float as the sum of two bf16 values, hi = bf16(x) and lo = bf16(x - hi):
// exact for every f16 value (11 significant bits: hi keeps 8, the rest fits
// lo), so an f16 product a b is exactly ah bh + ah bl + al bh + al bl, each
// term exact in f32. Three bf16 GEMMs (al bl, under 2^-18 of the product,
// dropped) give f16 matmul from bf16 hardware (AMX) with f32 accumulation.
#ifndef MIXRT_BACKENDS_CPU_KERNELS_BF16_PAIR_H_
#define MIXRT_BACKENDS_CPU_KERNELS_BF16_PAIR_H_

#include <cstdint>

namespace mixrt::cpu {

// hi[i], lo[i] for x[i], i < n. Infinities and NaN go to hi with lo = 0
// (x - hi would be NaN for an infinity). Returns whether every x[i] was
// finite: with an infinity, a cross term inf x 0 (hi x a zero lo) is NaN
// where the product is inf, so such operands need another path.
bool SplitIntoBf16Pairs(const float* x, int64_t n, uint16_t* hi, uint16_t* lo);

}  // namespace mixrt::cpu

#endif  // MIXRT_BACKENDS_CPU_KERNELS_BF16_PAIR_H_
