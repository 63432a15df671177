// Embedding lookup and its gradient. The gradient scatters rows of grad_out
// into an f32 accumulator with atomic adds, so rows that share an index sum
// in an unspecified order (as PyTorch's non-deterministic CUDA path does);
// the result is then cast into grad_weight's dtype.
#ifndef MIXRT_BACKENDS_GPU_EMBEDDING_FUNCTORS_H_
#define MIXRT_BACKENDS_GPU_EMBEDDING_FUNCTORS_H_

#include <cstdint>

#include "backends/gpu/device_tensor.h"
#include "mixrt/host_device.h"

namespace mixrt::gpu {

// atomicAdd on the device; the host tests run one thread, where += is it.
MIXRT_HOST_DEVICE inline void AtomicAddF32(float* address, float value) {
#if MIXRT_DEVICE_PASS
  atomicAdd(address, value);
#else
  *address += value;
#endif
}

// out[r, k] = weight[indices[r], k] over the flattened rows r of out [..., D].
struct EmbeddingFunctor {
  DeviceTensor out;
  DeviceTensor weight;   // [V, D]
  DeviceTensor indices;  // i64 [...]
  int64_t vocabulary;
  int64_t dim;
  int32_t* bad_input;
  MIXRT_HOST_DEVICE void operator()(int64_t i) const {
    const int64_t row = i / dim;
    const int64_t k = i % dim;
    const int64_t index = indices.LoadInt(indices.Offset(row));
    if (index < 0 || index >= vocabulary) {
      if (bad_input != nullptr) *bad_input = 1;
      out.StoreFloat(out.Offset(i), 0.0f);
      return;
    }
    out.StoreFloat(out.Offset(i),
                   weight.LoadFloat(weight.Offset(index * dim + k)));
  }
};

// accumulator[indices[r], k] += grad_out[r, k], skipping padding_idx rows.
struct EmbeddingBackwardFunctor {
  float* accumulator;  // f32 [V, D], zeroed.
  DeviceTensor grad_out;
  DeviceTensor indices;
  int64_t vocabulary;
  int64_t dim;
  int64_t padding_idx;
  int32_t* bad_input;
  MIXRT_HOST_DEVICE void operator()(int64_t i) const {
    const int64_t row = i / dim;
    const int64_t index = indices.LoadInt(indices.Offset(row));
    if (index < 0 || index >= vocabulary) {
      if (bad_input != nullptr) *bad_input = 1;
      return;
    }
    if (index == padding_idx) return;
    AtomicAddF32(&accumulator[index * dim + i % dim],
                 grad_out.LoadFloat(grad_out.Offset(i)));
  }
};

}  // namespace mixrt::gpu

#endif  // MIXRT_BACKENDS_GPU_EMBEDDING_FUNCTORS_H_
