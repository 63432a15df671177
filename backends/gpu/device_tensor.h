// A tensor view passed to GPU kernels by value: the MixrtTensorDesc fields
// copied into a fixed-size struct (kernel arguments cannot point at host
// arrays), with element access that is the same on host and device. The
// per-element code of every CUDA/HIP kernel goes through it, so the host
// unit tests exercise exactly what the device runs.
#ifndef MIXRT_BACKENDS_GPU_DEVICE_TENSOR_H_
#define MIXRT_BACKENDS_GPU_DEVICE_TENSOR_H_

#include <cstdint>

#include "mixrt/float_convert.h"
#include "mixrt/host_device.h"
#include "mixrt/plugin_api.h"

namespace mixrt::gpu {

struct DeviceTensor {
  void* data = nullptr;
  uint32_t dtype = MIXRT_DTYPE_F32;
  int32_t ndim = 0;
  bool contiguous = true;
  int64_t numel = 1;
  int64_t shape[MIXRT_MAX_DIMS] = {};
  int64_t strides[MIXRT_MAX_DIMS] = {};

  // Element offset of the row-major linear index `i` of this tensor's shape.
  MIXRT_HOST_DEVICE int64_t Offset(int64_t i) const {
    if (contiguous) return i;
    int64_t offset = 0;
    for (int d = ndim - 1; d >= 0; --d) {
      const int64_t extent = shape[d];
      offset += (i % extent) * strides[d];
      i /= extent;
    }
    return offset;
  }

  MIXRT_HOST_DEVICE float LoadFloat(int64_t offset) const {
    switch (dtype) {
      case MIXRT_DTYPE_F32:
        return static_cast<const float*>(data)[offset];
      case MIXRT_DTYPE_F16:
        return sdk::F16BitsToF32(static_cast<const uint16_t*>(data)[offset]);
      case MIXRT_DTYPE_BF16:
        return sdk::BF16BitsToF32(static_cast<const uint16_t*>(data)[offset]);
      case MIXRT_DTYPE_I32:
        return static_cast<float>(static_cast<const int32_t*>(data)[offset]);
      case MIXRT_DTYPE_I64:
        return static_cast<float>(static_cast<const int64_t*>(data)[offset]);
      default:
        return static_cast<const uint8_t*>(data)[offset] != 0 ? 1.0f : 0.0f;
    }
  }

  MIXRT_HOST_DEVICE int64_t LoadInt(int64_t offset) const {
    switch (dtype) {
      case MIXRT_DTYPE_I32:
        return static_cast<const int32_t*>(data)[offset];
      case MIXRT_DTYPE_I64:
        return static_cast<const int64_t*>(data)[offset];
      case MIXRT_DTYPE_BOOL:
        return static_cast<const uint8_t*>(data)[offset] != 0 ? 1 : 0;
      default:
        return FloatToInt64(LoadFloat(offset));
    }
  }

  // f16/bf16 round to nearest even; integers truncate toward zero,
  // saturating, NaN -> 0 (the ABI's MIXRT_OP_COPY rules); bool is v != 0.
  MIXRT_HOST_DEVICE void StoreFloat(int64_t offset, float value) const {
    if (dtype == MIXRT_DTYPE_BOOL) {
      static_cast<uint8_t*>(data)[offset] = value != 0.0f ? 1 : 0;
    } else if (is_integer()) {
      StoreInteger(offset, FloatToInt64(value));
    } else {
      StoreFloating(offset, value);
    }
  }

  MIXRT_HOST_DEVICE void StoreInt(int64_t offset, int64_t value) const {
    if (is_integer()) {
      StoreInteger(offset, value);
    } else {
      StoreFloating(offset, static_cast<float>(value));
    }
  }

  MIXRT_HOST_DEVICE bool is_integer() const {
    return dtype == MIXRT_DTYPE_I32 || dtype == MIXRT_DTYPE_I64 ||
           dtype == MIXRT_DTYPE_BOOL;
  }

  // The two stores by dtype family; kept apart so neither calls the other
  // (a recursive pair cannot be inlined on the device).
  MIXRT_HOST_DEVICE void StoreFloating(int64_t offset, float value) const {
    switch (dtype) {
      case MIXRT_DTYPE_F16:
        static_cast<uint16_t*>(data)[offset] = sdk::F32ToF16Bits(value);
        break;
      case MIXRT_DTYPE_BF16:
        static_cast<uint16_t*>(data)[offset] = sdk::F32ToBF16Bits(value);
        break;
      default:
        static_cast<float*>(data)[offset] = value;
        break;
    }
  }

  // i32 wraps modulo 2^32 as a C cast does.
  MIXRT_HOST_DEVICE void StoreInteger(int64_t offset, int64_t value) const {
    switch (dtype) {
      case MIXRT_DTYPE_I32:
        static_cast<int32_t*>(data)[offset] = static_cast<int32_t>(value);
        break;
      case MIXRT_DTYPE_I64:
        static_cast<int64_t*>(data)[offset] = value;
        break;
      default:
        static_cast<uint8_t*>(data)[offset] = value != 0 ? 1 : 0;
        break;
    }
  }

  MIXRT_HOST_DEVICE static int64_t FloatToInt64(float value) {
    if (value != value) return 0;
    if (value >= 9.2233720368547758e18f) return INT64_MAX;
    if (value <= -9.2233720368547758e18f) return INT64_MIN;
    return static_cast<int64_t>(value);
  }
};

// Copies a descriptor's fields; `desc.ndim` must already be validated.
inline DeviceTensor MakeDeviceTensor(const MixrtTensorDesc& desc) {
  DeviceTensor t;
  t.data = desc.data;
  t.dtype = desc.dtype;
  t.ndim = desc.ndim;
  int64_t expected = 1;
  for (int d = desc.ndim - 1; d >= 0; --d) {
    t.shape[d] = desc.shape[d];
    t.strides[d] = desc.strides[d];
    if (desc.shape[d] != 1 && desc.strides[d] != expected) t.contiguous = false;
    expected *= desc.shape[d];
  }
  t.numel = expected;
  // An empty tensor addresses nothing, so any strides describe it densely
  // (the host leaves a view's strides as they were when a dim is 0).
  if (expected == 0) t.contiguous = true;
  return t;
}

}  // namespace mixrt::gpu

#endif  // MIXRT_BACKENDS_GPU_DEVICE_TENSOR_H_
