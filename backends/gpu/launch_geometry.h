// Grid and block sizes of the GPU kernels: pure functions of the problem
// size and the device's properties, so they are tested on the CPU.
#ifndef MIXRT_BACKENDS_GPU_LAUNCH_GEOMETRY_H_
#define MIXRT_BACKENDS_GPU_LAUNCH_GEOMETRY_H_

#include <cstdint>

namespace mixrt::gpu {

struct DeviceLimits {
  int multiprocessors = 1;  // SMs (CUDA) or compute units (HIP).
  int warp_size = 32;       // 32 on NVIDIA and RDNA, 64 on CDNA.
  int max_threads_per_block = 1024;
};

struct Geometry {
  int64_t blocks = 0;  // 0: nothing to launch.
  int threads = 0;
};

// Grid-stride kernels: enough blocks to fill every multiprocessor a few
// times over, never more blocks than there are elements to give them.
Geometry GridStrideGeometry(int64_t elements, const DeviceLimits& limits);

// Row kernels (row_functors.h): one block per row (the kernel strides over
// rows past the grid limit); threads a multiple of the warp size, no more
// than the row has elements per thread to share, at most 256.
Geometry RowGeometry(int64_t rows, int64_t row_length,
                     const DeviceLimits& limits);

// How many blocks share each output of a reduction: 1 when the outputs
// alone fill the device; otherwise enough for about two blocks per
// multiprocessor, each with at least kMinSplitElements elements.
int64_t ReduceSplit(int64_t outputs, int64_t reduced_count,
                    const DeviceLimits& limits);
constexpr int64_t kMinSplitElements = 16384;

// Grid dimension limit shared by CUDA (x) and HIP.
constexpr int64_t kMaxGridBlocks = (int64_t{1} << 31) - 1;

}  // namespace mixrt::gpu

#endif  // MIXRT_BACKENDS_GPU_LAUNCH_GEOMETRY_H_
