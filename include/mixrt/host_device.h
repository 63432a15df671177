// Marks functions that CUDA and HIP device code call as well as host code, so
// one definition of each per-element formula serves every backend and is
// unit-tested on the CPU.
#ifndef MIXRT_HOST_DEVICE_H_
#define MIXRT_HOST_DEVICE_H_

#if defined(__CUDACC__) || defined(__HIPCC__)
#define MIXRT_HOST_DEVICE __host__ __device__
#else
#define MIXRT_HOST_DEVICE
#endif

// Fully unrolls the next loop in device code (constant trip counts keep
// small arrays such as a GEMM's accumulators in registers).
#if defined(__CUDACC__) || defined(__HIPCC__)
#define MIXRT_UNROLL _Pragma("unroll")
#else
#define MIXRT_UNROLL
#endif

// 1 while a device compiler compiles the device side of a translation unit.
#if defined(__CUDA_ARCH__) || defined(__HIP_DEVICE_COMPILE__)
#define MIXRT_DEVICE_PASS 1
#else
#define MIXRT_DEVICE_PASS 0
#endif

#endif  // MIXRT_HOST_DEVICE_H_
