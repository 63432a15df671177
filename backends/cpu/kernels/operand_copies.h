// Copies of a product's f32 operands in the layouts oneDNN's AVX2 f32 gemm
// runs fast, where it runs the layouts the caller holds slowly. Measured on
// a Zen 3 AVX2 machine, 2 threads, oneDNN 2.6.3 and 3.2 alike (gemm:jit),
// k = 1024 throughout:
// - a transposed (strides {1, lda}: x^T dy, every Linear's weight
//   gradient) with c tall and narrow: m 1024 x n 256 took 9.4 ms against
//   4.9 with a in rows (57 against 109 GFLOP/s), m 512 x n 256 87 against
//   129 GFLOP/s. Copying a into rows first costs one pass over it (0.4-0.9
//   ms for 4 MiB) and the product then ran 1.2-1.9x faster end to end
//   where m >= 512, n <= 256 and m >= 2n. A wider or shorter c gained
//   nothing or lost (m 1024 x n 1024: 0.91-0.96x).
// - b in rows whose stride is a multiple of 2 KiB (512 f32: n 512, 1024,
//   2048 ...) and m <= 256: the same product with b's rows 64 bytes
//   further apart ran 1.3-2.5x faster (m 256 x n 1024: 7.6 against 3.3 ms;
//   a 16-byte shift of b's start did it too: cache-set or 4K aliasing
//   between b's rows). Copying b with its rows padded costs one pass over
//   b (0.4 ms for 4 MiB). A transposed b (a Linear's forward) and m >= 512
//   (n >= 1024) showed no such effect.
// AVX-512's kernels were not measured this way, so these copies are made
// only where oneDNN runs on AVX2 (the CPU has no AVX-512, or
// ONEDNN_MAX_CPU_ISA caps oneDNN below it).
#ifndef MIXRT_BACKENDS_CPU_KERNELS_OPERAND_COPIES_H_
#define MIXRT_BACKENDS_CPU_KERNELS_OPERAND_COPIES_H_

#include <cstdint>
#include <memory>

#include "backends/cpu/onednn/prepared_matmul.h"

namespace mixrt::cpu {

// Whether the 2-D product `shape` has an f32 a transposed in the region
// above: copied into rows, it runs faster.
bool RowMajorAFaster(const MatmulShape& shape);

// Whether the 2-D product `shape` has an f32 b in rows a multiple of 2 KiB
// apart in the region above: copied into padded rows, it runs faster.
bool PaddedBFaster(const MatmulShape& shape);

// Whether f32 rows `ld` elements apart, `cols` long, are read slowly by
// oneDNN's AVX2 gemm as any operand and run faster copied back to back:
// oneDNN runs on AVX2 here and ld is a multiple of 2 KiB above cols.
// The fused attention reading heads in place (rows a model's width apart)
// hits it: its 128 x 256 x 64 weights x values product took 0.107 ms with
// values rows 2 KiB apart against 0.068 back to back, the scores 0.093
// against 0.073 (compiled transformer block, width 512, 8 heads).
bool F32RowsAliasOnAvx2(int64_t ld, int64_t cols);

// The copies a product runs on, alive until it has run.
struct OperandCopies {
  std::unique_ptr<float[]> a, b;
};

// Where RowMajorAFaster or PaddedBFaster holds (and oneDNN runs on AVX2),
// copies that operand into `copies`, points *a or *b at the copy, and sets
// shape's strides to describe it; otherwise leaves all as they are.
void CopyOperandsWhereFaster(MatmulShape* shape, const void** a, const void** b,
                             OperandCopies* copies);

// How many products had a copied into rows, and b into padded rows, in
// this process (tests).
struct OperandCopyCounts {
  int64_t a_into_rows = 0, b_padded = 0;
};
OperandCopyCounts OperandCopyCountsSoFar();

}  // namespace mixrt::cpu

#endif  // MIXRT_BACKENDS_CPU_KERNELS_OPERAND_COPIES_H_
