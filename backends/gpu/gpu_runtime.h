// The few runtime calls the GPU plugins make, named once for CUDA and HIP.
// gpu_plugin.cc is compiled twice, with MIXRT_GPU_HIP set for the ROCm
// plugin, instead of being kept as two copies that differ by a prefix.
#ifndef MIXRT_BACKENDS_GPU_GPU_RUNTIME_H_
#define MIXRT_BACKENDS_GPU_GPU_RUNTIME_H_

#include <cstddef>
#include <string>

#if MIXRT_GPU_HIP
#include <hip/hip_runtime_api.h>
#else
#include <cuda_runtime_api.h>
#endif

namespace mixrt::gpu::rt {

#if MIXRT_GPU_HIP
using Error = hipError_t;
using Stream = hipStream_t;
using DeviceProp = hipDeviceProp_t;
constexpr Error kSuccess = hipSuccess;
constexpr const char* kRuntime = "HIP";
constexpr const char* kGetDeviceCount = "hipGetDeviceCount";
inline Error GetDeviceCount(int* n) { return hipGetDeviceCount(n); }
inline Error SetDevice(int d) { return hipSetDevice(d); }
inline Error GetDeviceProperties(DeviceProp* p, int d) {
  return hipGetDeviceProperties(p, d);
}
inline Error Malloc(void** p, size_t bytes) { return hipMalloc(p, bytes); }
inline Error Free(void* p) { return hipFree(p); }
inline Error MemcpyAsync(void* dst, const void* src, size_t bytes, int kind,
                         Stream s) {
  static constexpr hipMemcpyKind kKinds[] = {
      hipMemcpyHostToDevice, hipMemcpyDeviceToHost, hipMemcpyDeviceToDevice};
  return hipMemcpyAsync(dst, src, bytes, kKinds[kind], s);
}
inline Error MemsetAsync(void* p, int value, size_t bytes, Stream s) {
  return hipMemsetAsync(p, value, bytes, s);
}
inline Error StreamCreate(Stream* s) {
  return hipStreamCreateWithFlags(s, hipStreamNonBlocking);
}
inline Error StreamDestroy(Stream s) { return hipStreamDestroy(s); }
inline Error StreamSynchronize(Stream s) { return hipStreamSynchronize(s); }
inline Error GetLastError() { return hipGetLastError(); }
inline const char* ErrorName(Error e) { return hipGetErrorName(e); }
inline const char* ErrorString(Error e) { return hipGetErrorString(e); }
inline bool IsOutOfMemory(Error e) { return e == hipErrorOutOfMemory; }
#else
using Error = cudaError_t;
using Stream = cudaStream_t;
using DeviceProp = cudaDeviceProp;
constexpr Error kSuccess = cudaSuccess;
constexpr const char* kRuntime = "CUDA";
constexpr const char* kGetDeviceCount = "cudaGetDeviceCount";
inline Error GetDeviceCount(int* n) { return cudaGetDeviceCount(n); }
inline Error SetDevice(int d) { return cudaSetDevice(d); }
inline Error GetDeviceProperties(DeviceProp* p, int d) {
  return cudaGetDeviceProperties(p, d);
}
inline Error Malloc(void** p, size_t bytes) { return cudaMalloc(p, bytes); }
inline Error Free(void* p) { return cudaFree(p); }
inline Error MemcpyAsync(void* dst, const void* src, size_t bytes, int kind,
                         Stream s) {
  static constexpr cudaMemcpyKind kKinds[] = {
      cudaMemcpyHostToDevice, cudaMemcpyDeviceToHost, cudaMemcpyDeviceToDevice};
  return cudaMemcpyAsync(dst, src, bytes, kKinds[kind], s);
}
inline Error MemsetAsync(void* p, int value, size_t bytes, Stream s) {
  return cudaMemsetAsync(p, value, bytes, s);
}
inline Error StreamCreate(Stream* s) {
  return cudaStreamCreateWithFlags(s, cudaStreamNonBlocking);
}
inline Error StreamDestroy(Stream s) { return cudaStreamDestroy(s); }
inline Error StreamSynchronize(Stream s) { return cudaStreamSynchronize(s); }
inline Error GetLastError() { return cudaGetLastError(); }
inline const char* ErrorName(Error e) { return cudaGetErrorName(e); }
inline const char* ErrorString(Error e) { return cudaGetErrorString(e); }
inline bool IsOutOfMemory(Error e) { return e == cudaErrorMemoryAllocation; }
#endif

// "cudaGetDeviceCount: cudaErrorInsufficientDriver (35): CUDA driver
// version is insufficient for CUDA runtime version".
inline std::string Describe(const char* call, Error e) {
  std::string text = std::string(call) + ": " + ErrorName(e) + " (" +
                     std::to_string(static_cast<int>(e)) + ")";
  const std::string detail = ErrorString(e);
  if (detail != ErrorName(e)) text += ": " + detail;
  return text;
}

}  // namespace mixrt::gpu::rt

#endif  // MIXRT_BACKENDS_GPU_GPU_RUNTIME_H_
