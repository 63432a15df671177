// Splits a list of contiguous tensors into fixed-size chunks and groups the
// chunks into launches whose whole description travels as one kernel
// argument (as torch's multi_tensor_apply does): the grad-scaler unscales
// every gradient of a model in a handful of launches, with no device-side
// metadata buffers and no host synchronization.
#ifndef MIXRT_BACKENDS_GPU_MULTI_TENSOR_PLAN_H_
#define MIXRT_BACKENDS_GPU_MULTI_TENSOR_PLAN_H_

#include <cstdint>
#include <vector>

#include "backends/gpu/device_tensor.h"

namespace mixrt::gpu {

// Kept small enough that a MultiTensorLaunch stays under the 4 KiB kernel
// parameter limit of CUDA before 12.1 and of HIP.
constexpr int kMultiTensorMaxTensors = 24;
constexpr int kMultiTensorMaxBlocks = 96;
constexpr int64_t kMultiTensorChunk = 64 * 1024;

struct MultiTensorBlock {
  int32_t tensor;  // Index into the launch's tensor arrays.
  int64_t start;   // First element of the chunk.
  int64_t count;
};

struct MultiTensorLaunch {
  int32_t num_tensors = 0;
  int32_t num_blocks = 0;
  void* data[kMultiTensorMaxTensors] = {};
  uint32_t dtype[kMultiTensorMaxTensors] = {};
  int64_t numel[kMultiTensorMaxTensors] = {};
  MultiTensorBlock blocks[kMultiTensorMaxBlocks] = {};

  MIXRT_HOST_DEVICE DeviceTensor Tensor(int32_t t) const {
    DeviceTensor d;
    d.data = data[t];
    d.dtype = dtype[t];
    d.ndim = 1;
    d.numel = numel[t];
    d.shape[0] = numel[t];
    d.strides[0] = 1;
    return d;
  }
};

struct MultiTensorInput {
  void* data;
  uint32_t dtype;
  int64_t numel;
};

// Every element of every tensor is covered by exactly one block of exactly
// one launch; empty tensors get no block.
std::vector<MultiTensorLaunch> PlanMultiTensorLaunches(
    const std::vector<MultiTensorInput>& tensors,
    int64_t chunk = kMultiTensorChunk);

}  // namespace mixrt::gpu

#endif  // MIXRT_BACKENDS_GPU_MULTI_TENSOR_PLAN_H_
