// A shared-memory tiled GEMM with f32 accumulation for any mix of f32, f16
// and bf16 operands, written as the phases of one thread block so that the
// host tests run the exact kernel logic (every thread of every block, phase
// by phase) against the reference plugin.
//
// The ROCm plugin uses it for every matmul because Debian ships no rocBLAS
// or hipBLASLt. It uses plain FMA: the CDNA matrix-core (MFMA) instructions
// are not used yet, so the ROCm capability reports f16/bf16 matmul as slow.
//
// Block: 256 threads compute a 64x64 tile of C; thread t owns the 4x4
// elements at rows (t / 16) + 16 i and columns (t % 16) + 16 j, which keeps
// the shared-memory reads of a warp on distinct banks.
#ifndef MIXRT_BACKENDS_GPU_TILED_GEMM_H_
#define MIXRT_BACKENDS_GPU_TILED_GEMM_H_

#include <cmath>
#include <cstdint>

#include "backends/gpu/device_tensor.h"
#include "backends/gpu/gemm_epilogue.h"

namespace mixrt::gpu {

struct TileCoord {
  int64_t row0;
  int64_t col0;
  int64_t batch;
};

struct TiledGemmGrid {
  int64_t x = 0;  // Column tiles.
  int64_t y = 0;  // Row tiles.
  int64_t z = 0;  // Batch.
};

// out[b] = epilogue(a[b] @ b[b]) for contiguous a [batch, m, k],
// b [batch, k, n] and out [batch, m, n].
struct TiledGemm {
  static constexpr int kTileM = 64;
  static constexpr int kTileN = 64;
  static constexpr int kTileK = 16;
  static constexpr int kThreads = 256;
  static constexpr int kThreadCols = 16;  // kTileN / 4
  static constexpr int kMicro = 4;

  struct Accumulator {
    float v[kMicro][kMicro];
  };
  using ATile = float[kTileK][kTileM + 1];
  using BTile = float[kTileK][kTileN + 1];

  DeviceTensor a;
  DeviceTensor b;
  DeviceTensor out;
  GemmEpilogue epilogue;
  int64_t m = 0;
  int64_t n = 0;
  int64_t k = 0;
  int64_t batch = 1;
  // First batch element of this launch: grids stop at 65535 in z, so larger
  // batches are split over several launches.
  int64_t batch_offset = 0;

  TiledGemmGrid Grid() const {
    return {(n + kTileN - 1) / kTileN, (m + kTileM - 1) / kTileM, batch};
  }

  MIXRT_HOST_DEVICE TileCoord Tile(int64_t bx, int64_t by, int64_t bz) const {
    return {by * kTileM, bx * kTileN, bz + batch_offset};
  }

  // Stages a[tile rows, k0:k0+kTileK] and b[k0:k0+kTileK, tile cols] as
  // f32, zero outside the matrices.
  MIXRT_HOST_DEVICE void LoadTiles(const TileCoord& t, int64_t k0, int tid,
                                   float (*a_tile)[kTileM + 1],
                                   float (*b_tile)[kTileN + 1]) const {
    for (int e = tid; e < kTileM * kTileK; e += kThreads) {
      const int r = e / kTileK;
      const int kk = e % kTileK;
      const int64_t row = t.row0 + r;
      const int64_t col = k0 + kk;
      a_tile[kk][r] = (row < m && col < k)
                          ? a.LoadFloat(a.Offset((t.batch * m + row) * k + col))
                          : 0.0f;
    }
    for (int e = tid; e < kTileK * kTileN; e += kThreads) {
      const int kk = e / kTileN;
      const int c = e % kTileN;
      const int64_t row = k0 + kk;
      const int64_t col = t.col0 + c;
      b_tile[kk][c] = (row < k && col < n)
                          ? b.LoadFloat(b.Offset((t.batch * k + row) * n + col))
                          : 0.0f;
    }
  }

  MIXRT_HOST_DEVICE void Accumulate(int tid, const float (*a_tile)[kTileM + 1],
                                    const float (*b_tile)[kTileN + 1],
                                    Accumulator* acc) const {
    const int tr = tid / kThreadCols;
    const int tc = tid % kThreadCols;
    MIXRT_UNROLL
    for (int kk = 0; kk < kTileK; ++kk) {
      float av[kMicro];
      float bv[kMicro];
      MIXRT_UNROLL
      for (int i = 0; i < kMicro; ++i) av[i] = a_tile[kk][tr + 16 * i];
      MIXRT_UNROLL
      for (int j = 0; j < kMicro; ++j) bv[j] = b_tile[kk][tc + 16 * j];
      MIXRT_UNROLL
      for (int i = 0; i < kMicro; ++i) {
        MIXRT_UNROLL
        for (int j = 0; j < kMicro; ++j) {
          acc->v[i][j] = fmaf(av[i], bv[j], acc->v[i][j]);
        }
      }
    }
  }

  MIXRT_HOST_DEVICE void Store(const TileCoord& t, int tid,
                               const Accumulator& acc) const {
    const int tr = tid / kThreadCols;
    const int tc = tid % kThreadCols;
    MIXRT_UNROLL
    for (int i = 0; i < kMicro; ++i) {
      const int64_t row = t.row0 + tr + 16 * i;
      if (row >= m) continue;
      MIXRT_UNROLL
      for (int j = 0; j < kMicro; ++j) {
        const int64_t col = t.col0 + tc + 16 * j;
        if (col >= n) continue;
        const int64_t o = out.Offset((t.batch * m + row) * n + col);
        out.StoreFloat(o, epilogue.Apply(out, o, col, acc.v[i][j]));
      }
    }
  }
};

}  // namespace mixrt::gpu

#endif  // MIXRT_BACKENDS_GPU_TILED_GEMM_H_
