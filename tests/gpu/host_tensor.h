// Host buffers with tensor descriptors, for running the GPU functors on the
// CPU side by side with the reference plugin.
#ifndef MIXRT_TESTS_GPU_HOST_TENSOR_H_
#define MIXRT_TESTS_GPU_HOST_TENSOR_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "backends/gpu/device_tensor.h"
#include "mixrt/plugin_api.h"

namespace mixrt::testing {

class HostTensor {
 public:
  HostTensor(MixrtDtype dtype, std::vector<int64_t> shape);
  // A view of the same storage with other strides (e.g. a transpose).
  HostTensor Strided(std::vector<int64_t> shape,
                     std::vector<int64_t> strides) const;

  MixrtDtype dtype() const { return dtype_; }
  int64_t numel() const;
  const std::vector<int64_t>& shape() const { return shape_; }
  void* data() const { return storage_->data(); }
  const MixrtTensorDesc& desc() const;
  gpu::DeviceTensor device() const { return gpu::MakeDeviceTensor(desc()); }

  // Row-major linear index i, through the strides; floats round on store.
  double Get(int64_t i) const;
  void Set(int64_t i, double v);
  std::vector<double> Values() const;
  // N(0, scale^2)-ish values from a fixed seed; integers in [lo, hi].
  HostTensor& FillRandom(uint64_t seed, double scale = 1.0);
  HostTensor& FillInts(uint64_t seed, int64_t lo, int64_t hi);
  HostTensor& Fill(const std::vector<double>& values);
  HostTensor Clone() const;  // Same shape and dtype, own contiguous copy.

 private:
  MixrtDtype dtype_;
  std::vector<int64_t> shape_;
  std::vector<int64_t> strides_;
  std::shared_ptr<std::vector<uint64_t>> storage_;  // 8-byte aligned.
  mutable MixrtTensorDesc desc_{};
};

// Runs `op` on the reference plugin over host tensors.
void RunReference(MixrtOp op, const std::vector<const HostTensor*>& inputs,
                  const std::vector<const HostTensor*>& outputs,
                  const void* attrs);

// Relative tolerance for a value computed in f32 and stored in `dtype`,
// against a double-precision reference stored in `dtype`: the two may round
// to neighbouring values (2 ulp of the dtype: 2^-7 bf16, 2^-10 f16) and the
// f32 math adds a few f32 ulps (1e-5 covers accumulations of ~100 terms).
double StoreTolerance(MixrtDtype dtype);

// |got - want| <= tol * (|want| + scale) elementwise, NaN matching NaN and
// infinities matching exactly; `scale` absorbs cancellation in sums.
void ExpectNear(const std::vector<double>& got, const std::vector<double>& want,
                double tol, double scale, const std::string& what);

}  // namespace mixrt::testing

#endif  // MIXRT_TESTS_GPU_HOST_TENSOR_H_
