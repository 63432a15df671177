// The fused attention's two bf16 GEMMs on AMX tiles (Sapphire Rapids and
// later), for head and value widths that are multiples of 32. In the
// attention loop these ran at about twice oneDNN's speed on the same
// blocks: oneDNN repacked the key chunk on every call (its matmul API has
// no way to keep a packed operand between calls), and its per-call cost
// was paid 8 times per 128-row block and 512-key chunk.
//
// Keys and values are packed once per (batch, head) into the VNNI layout
// the tile multiply reads (pairs of bf16 along the reduced dimension), zero
// padded to a multiple of 32 keys; the queries and weights are read in
// place, their row counts a multiple of 32.
#ifndef MIXRT_BACKENDS_CPU_GEMM_AMX_TILES_H_
#define MIXRT_BACKENDS_CPU_GEMM_AMX_TILES_H_

#include <cstdint>

namespace mixrt::cpu {

// Whether this process can use the tiles: the CPU has AMX-BF16, the Linux
// kernel granted the tile state (arch_prctl, asked once), and
// ONEDNN_MAX_CPU_ISA does not cap oneDNN below avx512_core_amx (the
// plugin's own kernels follow the same cap).
bool AmxTilesUsable();

// Keys rounded up to the tiles' 32.
int64_t AmxPaddedKeys(int64_t keys);

// k [keys, e] (bf16 bits, row-major) into the right operand of q k^T:
// AmxPaddedKeys(keys) * e elements at out. e % 32 == 0.
void AmxPackKeys(const uint16_t* k, int64_t keys, int64_t e, uint16_t* out);

// v [keys, ev] into the right operand of weights x v: AmxPaddedKeys(keys) *
// ev elements at out. ev % 32 == 0.
void AmxPackValues(const uint16_t* v, int64_t keys, int64_t ev, uint16_t* out);

// scores [rows, cols] (f32, row stride lds) = q [rows, e] (row stride e) x
// the packed keys [j0, j0 + cols)^T, where packed_keys points at key j0's
// block (AmxPackKeys's out + j0 * e). rows, cols, j0 and e multiples of 32.
// With row_max, also row_max[i] = the maximum of row i's first valid_cols
// scores, or NaN when any score in its 32-row strip is NaN (the caller
// finds that row's maximum itself).
void AmxScores(const uint16_t* q, int64_t rows, int64_t e,
               const uint16_t* packed_keys, int64_t cols, float* scores,
               int64_t lds, int64_t valid_cols = 0, float* row_max = nullptr);

// acc [rows, ev] (f32, row-major) += weights [rows, cols] (bf16, row
// stride ldw) x the packed values [j0, j0 + cols), packed_values pointing
// at key j0's block (AmxPackValues's out + j0 * ev). rows, cols, j0 and ev
// multiples of 32.
void AmxAccumulateWeightedValues(const uint16_t* weights, int64_t rows,
                                 int64_t cols, int64_t ldw,
                                 const uint16_t* packed_values, int64_t ev,
                                 float* acc);

}  // namespace mixrt::cpu

#endif  // MIXRT_BACKENDS_CPU_GEMM_AMX_TILES_H_
