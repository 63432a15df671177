// The total L2 norm of many tensors (MIXRT_OP_MULTI_TENSOR_NORM) in two
// stages, deterministic whatever the launch geometry: every chunk of a
// multi-tensor launch is one row of the row protocol (row_functors.h) whose
// sum of squares lands in its own slot, then one thread folds the slots in
// order, in double, and takes the root.
#ifndef MIXRT_BACKENDS_GPU_MULTI_TENSOR_NORM_FUNCTORS_H_
#define MIXRT_BACKENDS_GPU_MULTI_TENSOR_NORM_FUNCTORS_H_

#include <cmath>
#include <cstdint>

#include "backends/gpu/multi_tensor_plan.h"
#include "backends/gpu/row_functors.h"

namespace mixrt::gpu {

struct MultiTensorNormRows {
  static constexpr int kPasses = 1;
  MultiTensorLaunch launch;
  float* partials;  // One slot per chunk of every launch.
  int64_t first;    // This launch's first slot.

  MIXRT_HOST_DEVICE RowAcc Partial(int, int64_t row, int lane, int lanes,
                                   const RowAcc*) const {
    const MultiTensorBlock& b = launch.blocks[row];
    const DeviceTensor t = launch.Tensor(b.tensor);
    float sum = 0.0f;
    for (int64_t i = b.start + lane; i < b.start + b.count; i += lanes) {
      const float v = t.LoadFloat(i);
      sum += v * v;
    }
    return MakeAcc(sum);
  }
  MIXRT_HOST_DEVICE RowAcc Combine(int, const RowAcc& a,
                                   const RowAcc& b) const {
    return MakeAcc(a.v[0] + b.v[0]);
  }
  MIXRT_HOST_DEVICE void Write(int64_t row, int lane, int,
                               const RowAcc* acc) const {
    if (lane == 0) partials[first + row] = acc[0].v[0];
  }
};

struct MultiTensorNormFinish {
  const float* partials;
  int64_t count;  // 0 for no elements at all: the norm is 0.
  float* out;
  MIXRT_HOST_DEVICE void operator()(int64_t) const {
    double sum = 0.0;
    for (int64_t i = 0; i < count; ++i) sum += partials[i];
    *out = static_cast<float>(sqrt(sum));
  }
};

}  // namespace mixrt::gpu

#endif  // MIXRT_BACKENDS_GPU_MULTI_TENSOR_NORM_FUNCTORS_H_
