// The fused attention's f32 GEMMs whose reduced dimension is the head
// width (scores q k^T and, in backward, dO v^T) or whose left operand is
// read transposed (dV += P^T dO, dK += dS^T q), in AVX-512 registers. On
// these blocks oneDNN's brgemm ran at ~74% of FMA peak: it repacked the
// key chunk, or transposed the left operand, on every call (its matmul API
// cannot keep a packed operand between calls). Here keys (and values) are
// packed once per (batch, head) into 32-key panels that stay in L1 while a
// query block streams past, and the transposed operand is read in place
// with broadcasts.
#ifndef MIXRT_BACKENDS_CPU_GEMM_F32_TILES_H_
#define MIXRT_BACKENDS_CPU_GEMM_F32_TILES_H_

#include <cstdint>

namespace mixrt::cpu {

// Whether the CPU has AVX-512 (F, BW, DQ, VL) and ONEDNN_MAX_CPU_ISA does
// not cap oneDNN below avx512_core (the plugin's own kernels follow the
// same cap).
bool F32TilesUsable();

// Keys rounded up to whole 32-key panels.
int64_t F32PanelKeys(int64_t keys);

// m [keys, depth] (row-major, row stride ld) into panels of m^T:
// F32PanelKeys(keys) * depth floats at out, the keys past `keys` zero.
void F32PackPanels(const float* m, int64_t keys, int64_t depth, int64_t ld,
                   float* out);

// c [rows, cols] (row stride ldc) = a [rows, depth] (row stride lda) x the
// packed keys [j0, j0 + cols)^T, `panels` pointing at key j0's panel
// (F32PackPanels's out + j0 * depth, j0 a multiple of 32).
void F32TimesPanels(const float* a, int64_t rows, int64_t depth, int64_t lda,
                    const float* panels, int64_t cols, float* c, int64_t ldc);

// c [m, n] (row stride ldc) += a^T b, where a is [depth, m] (row stride lda)
// and b [depth, n] (row stride ldb); n a multiple of 16.
void F32AccumulateTransposedTimes(const float* a, int64_t m, int64_t depth,
                                  int64_t lda, const float* b, int64_t n,
                                  int64_t ldb, float* c, int64_t ldc);

}  // namespace mixrt::cpu

#endif  // MIXRT_BACKENDS_CPU_GEMM_F32_TILES_H_
