// The GPU kernels' loops, run on the host: the same functor calls in the
// same per-thread pattern, executed sequentially. Row functors fold the lane
// partials in lane order (the device folds in a tree: equal up to rounding).
#ifndef MIXRT_TESTS_GPU_HOST_LAUNCH_H_
#define MIXRT_TESTS_GPU_HOST_LAUNCH_H_

#include <cstdint>
#include <vector>

#include "backends/gpu/optimizer_functors.h"
#include "backends/gpu/row_functors.h"
#include "backends/gpu/tiled_gemm.h"

namespace mixrt::testing {

template <typename F>
void RunElementwiseOnHost(const F& f, int64_t n) {
  for (int64_t i = 0; i < n; ++i) f(i);
}

template <typename F>
void RunRowsOnHost(const F& f, int64_t rows, int lanes) {
  for (int64_t row = 0; row < rows; ++row) {
    gpu::RowAcc acc[2] = {};
    for (int pass = 0; pass < F::kPasses; ++pass) {
      gpu::RowAcc total = f.Partial(pass, row, 0, lanes, acc);
      for (int lane = 1; lane < lanes; ++lane) {
        total = f.Combine(pass, total, f.Partial(pass, row, lane, lanes, acc));
      }
      acc[pass] = total;
    }
    for (int lane = 0; lane < lanes; ++lane) f.Write(row, lane, lanes, acc);
  }
}

inline void RunUnscaleOnHost(const gpu::UnscaleChunkFunctor& f, int threads) {
  for (int block = 0; block < f.launch.num_blocks; ++block) {
    for (int thread = 0; thread < threads; ++thread) f(block, thread, threads);
  }
}

// Every block of the grid, each phase for all 256 threads before the next
// (what __syncthreads guarantees on the device).
inline void RunTiledGemmOnHost(const gpu::TiledGemm& gemm) {
  using G = gpu::TiledGemm;
  const gpu::TiledGemmGrid grid = gemm.Grid();
  std::vector<G::Accumulator> acc(G::kThreads);
  static float a_tile[G::kTileK][G::kTileM + 1];
  static float b_tile[G::kTileK][G::kTileN + 1];
  for (int64_t z = 0; z < grid.z; ++z) {
    for (int64_t y = 0; y < grid.y; ++y) {
      for (int64_t x = 0; x < grid.x; ++x) {
        const gpu::TileCoord tile = gemm.Tile(x, y, z);
        for (auto& a : acc) a = G::Accumulator{};
        for (int64_t k0 = 0; k0 < gemm.k; k0 += G::kTileK) {
          for (int t = 0; t < G::kThreads; ++t) {
            gemm.LoadTiles(tile, k0, t, a_tile, b_tile);
          }
          for (int t = 0; t < G::kThreads; ++t) {
            gemm.Accumulate(t, a_tile, b_tile, &acc[t]);
          }
        }
        for (int t = 0; t < G::kThreads; ++t) gemm.Store(tile, t, acc[t]);
      }
    }
  }
}

}  // namespace mixrt::testing

#endif  // MIXRT_TESTS_GPU_HOST_LAUNCH_H_
