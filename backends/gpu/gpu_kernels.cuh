// The CUDA/HIP kernels of the GPU backends: thin loops around the functors
// of elementwise_functors.h, row_functors.h, optimizer_functors.h and
// tiled_gemm.h, which hold all the per-element math. Included once per
// backend by a .cu (nvcc) or .hip (hipcc) file that defines
// MIXRT_GPU_INSTANTIATE_LAUNCHERS.
#ifndef MIXRT_BACKENDS_GPU_GPU_KERNELS_CUH_
#define MIXRT_BACKENDS_GPU_GPU_KERNELS_CUH_

#if defined(__HIPCC__)
#include <hip/hip_runtime.h>
using GpuStream = hipStream_t;
#define MIXRT_GPU_LAST_ERROR() static_cast<int>(hipGetLastError())
#define MIXRT_SHFL_DOWN(v, offset) __shfl_down(v, offset)
#define MIXRT_GRID_CONSTANT
#else
#include <cuda_runtime.h>
using GpuStream = cudaStream_t;
// Kernel parameters are functors of several DeviceTensors (up to ~1.3 KB)
// whose members take `this`. When such a call is not inlined, nvcc copies
// the whole functor into every thread's local memory; __grid_constant__ lets
// it pass the parameter's own address instead.
#define MIXRT_GRID_CONSTANT __grid_constant__
#define MIXRT_GPU_LAST_ERROR() static_cast<int>(cudaGetLastError())
#define MIXRT_SHFL_DOWN(v, offset) __shfl_down_sync(0xffffffffu, v, offset)
#endif

#include "backends/gpu/gpu_launch.h"

namespace mixrt::gpu {

template <typename F>
__global__ void GridStrideKernel(const MIXRT_GRID_CONSTANT F f, int64_t n) {
  const int64_t stride = static_cast<int64_t>(blockDim.x) * gridDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
       i < n; i += stride) {
    f(i);
  }
}

template <typename F>
int LaunchElementwise(const LaunchContext& ctx, const F& f, int64_t n) {
  const Geometry g = GridStrideGeometry(n, ctx.limits);
  if (g.blocks == 0) return 0;
  GridStrideKernel<F><<<static_cast<unsigned>(g.blocks), g.threads, 0,
                        static_cast<GpuStream>(ctx.stream)>>>(f, n);
  return MIXRT_GPU_LAST_ERROR();
}

// Combines the partials of a warp into its lane 0, in tree order.
template <typename F>
__device__ RowAcc WarpCombine(const F& f, int pass, RowAcc acc) {
  for (int offset = warpSize / 2; offset > 0; offset /= 2) {
    RowAcc other;
    for (int j = 0; j < 3; ++j) other.v[j] = MIXRT_SHFL_DOWN(acc.v[j], offset);
    acc = f.Combine(pass, acc, other);
  }
  return acc;
}

// Up to 1024 threads of 32 lanes: 32 warp partials.
constexpr int kMaxWarpsPerBlock = 32;

template <typename F>
__global__ void RowKernel(const MIXRT_GRID_CONSTANT F f, int64_t rows) {
  __shared__ RowAcc warp_partials[kMaxWarpsPerBlock];
  __shared__ RowAcc results[2];
  const int lane = threadIdx.x % warpSize;
  const int warp = threadIdx.x / warpSize;
  const int warps = (blockDim.x + warpSize - 1) / warpSize;
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    for (int pass = 0; pass < F::kPasses; ++pass) {
      RowAcc acc = f.Partial(pass, row, threadIdx.x, blockDim.x, results);
      acc = WarpCombine(f, pass, acc);
      if (lane == 0) warp_partials[warp] = acc;
      __syncthreads();
      if (threadIdx.x == 0) {
        RowAcc total = warp_partials[0];
        for (int w = 1; w < warps; ++w) {
          total = f.Combine(pass, total, warp_partials[w]);
        }
        results[pass] = total;
      }
      __syncthreads();
    }
    f.Write(row, threadIdx.x, blockDim.x, results);
    __syncthreads();
  }
}

template <typename F>
int LaunchRows(const LaunchContext& ctx, const F& f, int64_t rows,
               int64_t row_length) {
  const Geometry g = RowGeometry(rows, row_length, ctx.limits);
  if (g.blocks == 0) return 0;
  RowKernel<F><<<static_cast<unsigned>(g.blocks), g.threads, 0,
                 static_cast<GpuStream>(ctx.stream)>>>(f, rows);
  return MIXRT_GPU_LAST_ERROR();
}

// blockIdx.x picks the chunk; the kUnscaleSplit blocks along y share it as
// one wide team of threads. A launch holds at most kMultiTensorMaxBlocks
// chunks (the kernel-parameter limit), and one 256-thread block per chunk
// left most of a large GPU idle: unscaling 50M gradients took 1.2 ms on an
// H100, 8x its memory time.
constexpr unsigned kUnscaleSplit = 16;

__global__ void UnscaleKernel(const MIXRT_GRID_CONSTANT UnscaleChunkFunctor f) {
  f(blockIdx.x, blockIdx.y * blockDim.x + threadIdx.x, gridDim.y * blockDim.x);
}

int LaunchUnscale(const LaunchContext& ctx, const UnscaleChunkFunctor& f) {
  if (f.launch.num_blocks == 0) return 0;
  const dim3 grid(static_cast<unsigned>(f.launch.num_blocks), kUnscaleSplit);
  UnscaleKernel<<<grid, 256, 0, static_cast<GpuStream>(ctx.stream)>>>(f);
  return MIXRT_GPU_LAST_ERROR();
}

// One block computes one kTileM x kTileN tile of C; the phases are the
// TiledGemm member functions, run here by the block's threads in lockstep.
__global__ void __launch_bounds__(TiledGemm::kThreads)
    TiledGemmKernel(const MIXRT_GRID_CONSTANT TiledGemm gemm) {
  __shared__ float a_tile[TiledGemm::kTileK][TiledGemm::kTileM + 1];
  __shared__ float b_tile[TiledGemm::kTileK][TiledGemm::kTileN + 1];
  TiledGemm::Accumulator acc = {};
  const TileCoord tile = gemm.Tile(blockIdx.x, blockIdx.y, blockIdx.z);
  for (int64_t k0 = 0; k0 < gemm.k; k0 += TiledGemm::kTileK) {
    gemm.LoadTiles(tile, k0, threadIdx.x, a_tile, b_tile);
    __syncthreads();
    gemm.Accumulate(threadIdx.x, a_tile, b_tile, &acc);
    __syncthreads();
  }
  gemm.Store(tile, threadIdx.x, acc);
}

int LaunchTiledGemm(const LaunchContext& ctx, const TiledGemm& gemm) {
  constexpr int64_t kMaxGridYZ = 65535;
  const TiledGemmGrid grid = gemm.Grid();
  if (grid.x == 0 || grid.y == 0 || grid.z == 0) return 0;
  if (grid.y > kMaxGridYZ || grid.x > kMaxGridBlocks) {
#if defined(__HIPCC__)
    return static_cast<int>(hipErrorInvalidConfiguration);
#else
    return static_cast<int>(cudaErrorInvalidConfiguration);
#endif
  }
  for (int64_t first = 0; first < grid.z; first += kMaxGridYZ) {
    TiledGemm part = gemm;
    part.batch_offset = first;
    const int64_t z = grid.z - first < kMaxGridYZ ? grid.z - first : kMaxGridYZ;
    TiledGemmKernel<<<dim3(grid.x, grid.y, z), TiledGemm::kThreads, 0,
                      static_cast<GpuStream>(ctx.stream)>>>(part);
    if (const int error = MIXRT_GPU_LAST_ERROR(); error != 0) return error;
  }
  return 0;
}

#define MIXRT_GPU_INSTANTIATE_ELEMENTWISE(F) \
  template int LaunchElementwise<F>(const LaunchContext&, const F&, int64_t);
#define MIXRT_GPU_INSTANTIATE_ROWS(F) \
  template int LaunchRows<F>(const LaunchContext&, const F&, int64_t, int64_t);

}  // namespace mixrt::gpu

#endif  // MIXRT_BACKENDS_GPU_GPU_KERNELS_CUH_
