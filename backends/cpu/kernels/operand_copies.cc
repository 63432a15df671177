#include "backends/cpu/kernels/operand_copies.h"

#include <algorithm>
#include <atomic>
#include <cstring>

#include "backends/cpu/capability/cpu_info.h"
#include "backends/cpu/gemm/tile_packing.h"
#include "backends/cpu/kernels/parallel.h"

namespace mixrt::cpu {
namespace {

// The regions measured to gain (operand_copies.h).
constexpr int64_t kRowMajorAMaxN = 256;
constexpr int64_t kRowMajorAMinM = 512;
constexpr int64_t kPaddedBMinM = 64;
constexpr int64_t kPaddedBMaxM = 256;
constexpr int64_t kPaddedBMinN = 512;
// b's row stride (in f32) is a multiple of this in the slow layout; the
// copy's rows are this much longer (64 bytes).
constexpr int64_t kAliasingStride = 512;
constexpr int64_t kRowPadding = 16;
// A larger operand keeps its layout rather than take a copy this large
// (64 MiB).
constexpr int64_t kMaxCopiedElements = int64_t{1} << 24;
// a is transposed a 32 x 32 block (4 KiB) at a time, in L1.
constexpr int64_t kBlock = 32;

std::atomic<int64_t> g_a_into_rows{0}, g_b_padded{0};

bool PlainF32Product(const MatmulShape& shape) {
  return !shape.packed_b && shape.a.dtype == MIXRT_DTYPE_F32 &&
         shape.b.dtype == MIXRT_DTYPE_F32 && shape.a.dims.size() == 2 &&
         shape.b.dims.size() == 2 && shape.c.dims.size() == 2;
}

bool OneDnnOnAvx2() { return !GetCpuInfo().onednn_avx512; }

// a (dims {m, k}, strides {1, lda}) into m rows of k, padded when k is a
// multiple of 2 KiB (b's rule, for a's rows: the copy of a 4 MiB a took
// 0.84 ms into padded rows against 1.00 into rows 4 KiB apart).
void CopyAIntoRows(const float* a, MatmulShape* shape,
                   std::unique_ptr<float[]>* rows) {
  const int64_t m = shape->a.dims[0], k = shape->a.dims[1];
  const int64_t lda = shape->a.strides[1];
  const int64_t ld = k % kAliasingStride == 0 ? k + kRowPadding : k;
  rows->reset(new float[m * ld]);
  float* out = rows->get();
  // a's memory holds k rows of m, which TransposePanel turns into m rows
  // of k: 32 of them a task.
  const int64_t blocks = (m + kBlock - 1) / kBlock;
  ParallelFor(blocks, GrainFor(kBlock * k), [&](int64_t begin, int64_t end) {
    for (int64_t block = begin; block < end; ++block) {
      const int64_t i0 = block * kBlock, width = std::min(kBlock, m - i0);
      for (int64_t j0 = 0; j0 < k; j0 += kBlock) {
        TransposePanel(a + j0 * lda + i0, lda, std::min(kBlock, k - j0), width,
                       out + i0 * ld + j0, ld);
      }
    }
  });
  shape->a.strides = {ld, 1};
  g_a_into_rows.fetch_add(1, std::memory_order_relaxed);
}

// b (dims {k, n}, strides {ldb, 1}) into k rows of n, kRowPadding apart
// more than n.
void CopyBIntoPaddedRows(const float* b, MatmulShape* shape,
                         std::unique_ptr<float[]>* rows) {
  const int64_t k = shape->b.dims[0], n = shape->b.dims[1];
  const int64_t ldb = shape->b.strides[0], padded = n + kRowPadding;
  rows->reset(new float[k * padded]);
  float* out = rows->get();
  ParallelFor(k, GrainFor(n), [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      std::memcpy(out + r * padded, b + r * ldb, n * sizeof(float));
    }
  });
  shape->b.strides = {padded, 1};
  g_b_padded.fetch_add(1, std::memory_order_relaxed);
}

}  // namespace

bool RowMajorAFaster(const MatmulShape& shape) {
  if (!PlainF32Product(shape)) return false;
  const int64_t m = shape.a.dims[0], k = shape.a.dims[1], n = shape.c.dims[1];
  const bool transposed =
      shape.a.strides[0] == 1 && shape.a.strides[1] >= m && k > 1;
  return transposed && n <= kRowMajorAMaxN && m >= kRowMajorAMinM &&
         m >= 2 * n && m * k <= kMaxCopiedElements;
}

bool PaddedBFaster(const MatmulShape& shape) {
  if (!PlainF32Product(shape)) return false;
  const int64_t m = shape.a.dims[0], k = shape.b.dims[0], n = shape.b.dims[1];
  const int64_t ldb = shape.b.strides[0];
  // Rows apart (not a row repeated by a stride 0) by a multiple of 2 KiB.
  const bool rows = shape.b.strides[1] == 1 && k > 1 && ldb >= n;
  return rows && ldb % kAliasingStride == 0 && n >= kPaddedBMinN &&
         m >= kPaddedBMinM && m <= kPaddedBMaxM &&
         k * (n + kRowPadding) <= kMaxCopiedElements;
}

bool F32RowsAliasOnAvx2(int64_t ld, int64_t cols) {
  return ld > cols && ld % kAliasingStride == 0 && OneDnnOnAvx2();
}

void CopyOperandsWhereFaster(MatmulShape* shape, const void** a, const void** b,
                             OperandCopies* copies) {
  if (!OneDnnOnAvx2()) return;
  if (RowMajorAFaster(*shape)) {
    CopyAIntoRows(static_cast<const float*>(*a), shape, &copies->a);
    *a = copies->a.get();
  }
  if (PaddedBFaster(*shape)) {
    CopyBIntoPaddedRows(static_cast<const float*>(*b), shape, &copies->b);
    *b = copies->b.get();
  }
}

OperandCopyCounts OperandCopyCountsSoFar() {
  return {g_a_into_rows.load(), g_b_padded.load()};
}

}  // namespace mixrt::cpu
