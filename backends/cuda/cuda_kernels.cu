// The shared GPU kernels (backends/gpu/gpu_kernels.cuh) instantiated for
// CUDA. Everything the kernels compute lives in host-tested functors.
#include "backends/gpu/gpu_kernels.cuh"

namespace mixrt::gpu {
MIXRT_GPU_FOR_EACH_ELEMENTWISE_FUNCTOR(MIXRT_GPU_INSTANTIATE_ELEMENTWISE)
MIXRT_GPU_FOR_EACH_ROW_FUNCTOR(MIXRT_GPU_INSTANTIATE_ROWS)
}  // namespace mixrt::gpu
