#include "backends/gpu/launch_geometry.h"

#include <algorithm>

namespace mixrt::gpu {
namespace {

constexpr int kGridStrideThreads = 256;
// Resident blocks per multiprocessor worth aiming for: 2048 threads per SM
// on recent NVIDIA parts is 8 blocks of 256.
constexpr int64_t kBlocksPerMultiprocessor = 8;
constexpr int kMaxRowThreads = 256;

}  // namespace

Geometry GridStrideGeometry(int64_t elements, const DeviceLimits& limits) {
  if (elements <= 0) return {};
  const int threads =
      std::min(kGridStrideThreads, limits.max_threads_per_block);
  const int64_t needed = (elements + threads - 1) / threads;
  const int64_t fill =
      std::max<int64_t>(1, limits.multiprocessors) * kBlocksPerMultiprocessor;
  return {std::min({needed, fill, kMaxGridBlocks}), threads};
}

Geometry RowGeometry(int64_t rows, int64_t row_length,
                     const DeviceLimits& limits) {
  if (rows <= 0) return {};
  const int warp = std::max(1, limits.warp_size);
  const int cap = std::min(kMaxRowThreads, limits.max_threads_per_block);
  int threads = warp;
  while (threads < cap && threads < row_length) threads *= 2;
  threads = std::max(warp, std::min(threads, cap) / warp * warp);
  return {std::min(rows, kMaxGridBlocks), threads};
}

int64_t ReduceSplit(int64_t outputs, int64_t reduced_count,
                    const DeviceLimits& limits) {
  const int64_t wanted = 2 * std::max(1, limits.multiprocessors);
  if (outputs <= 0 || outputs >= wanted) return 1;
  const int64_t by_device = (wanted + outputs - 1) / outputs;
  const int64_t by_size = reduced_count / kMinSplitElements;
  return std::max<int64_t>(1, std::min(by_device, by_size));
}

}  // namespace mixrt::gpu
