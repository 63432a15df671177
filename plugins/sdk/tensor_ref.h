// Read-only access to a MixrtTensorDesc for kernel authors: shape, strides,
// element access by dtype, and a strided walk over several same-shape tensors.
#ifndef MIXRT_PLUGINS_SDK_TENSOR_REF_H_
#define MIXRT_PLUGINS_SDK_TENSOR_REF_H_

#include <array>
#include <cstdint>
#include <cstring>

#include "mixrt/float_convert.h"
#include "mixrt/plugin_api.h"

namespace mixrt::sdk {

class TensorRef {
 public:
  explicit TensorRef(const MixrtTensorDesc& desc) : desc_(&desc) {}

  MixrtDtype dtype() const { return static_cast<MixrtDtype>(desc_->dtype); }
  int ndim() const { return desc_->ndim; }
  int64_t dim(int i) const { return desc_->shape[i]; }
  int64_t stride(int i) const { return desc_->strides[i]; }
  const int64_t* shape() const { return desc_->shape; }
  const int64_t* strides() const { return desc_->strides; }
  void* data() const { return desc_->data; }
  const MixrtTensorDesc* desc() const { return desc_; }

  int64_t numel() const {
    int64_t n = 1;
    for (int i = 0; i < ndim(); ++i) n *= dim(i);
    return n;
  }

  // True when the elements are dense in row-major order.
  bool is_contiguous() const {
    int64_t expected = 1;
    for (int i = ndim() - 1; i >= 0; --i) {
      if (dim(i) != 1 && stride(i) != expected) return false;
      expected *= dim(i);
    }
    return true;
  }

  bool same_shape(const TensorRef& other) const {
    if (ndim() != other.ndim()) return false;
    for (int i = 0; i < ndim(); ++i) {
      if (dim(i) != other.dim(i)) return false;
    }
    return true;
  }

  // Element at `offset` (in elements from data()) as a float; f16/bf16 exact.
  float LoadFloat(int64_t offset) const {
    switch (dtype()) {
      case MIXRT_DTYPE_F32:
        return static_cast<const float*>(data())[offset];
      case MIXRT_DTYPE_F16:
        return F16BitsToF32(static_cast<const uint16_t*>(data())[offset]);
      case MIXRT_DTYPE_BF16:
        return BF16BitsToF32(static_cast<const uint16_t*>(data())[offset]);
      case MIXRT_DTYPE_I32:
        return static_cast<float>(static_cast<const int32_t*>(data())[offset]);
      case MIXRT_DTYPE_I64:
        return static_cast<float>(static_cast<const int64_t*>(data())[offset]);
      case MIXRT_DTYPE_BOOL:
        return static_cast<const uint8_t*>(data())[offset] != 0 ? 1.0f : 0.0f;
      default:
        return 0.0f;
    }
  }

  int64_t LoadInt(int64_t offset) const {
    switch (dtype()) {
      case MIXRT_DTYPE_I32:
        return static_cast<const int32_t*>(data())[offset];
      case MIXRT_DTYPE_I64:
        return static_cast<const int64_t*>(data())[offset];
      case MIXRT_DTYPE_BOOL:
        return static_cast<const uint8_t*>(data())[offset] != 0 ? 1 : 0;
      default:
        return FloatToInt64(LoadFloat(offset));
    }
  }

  // Stores a float, rounding to nearest even for f16/bf16. Integer
  // destinations truncate toward zero, saturating; NaN becomes 0.
  void StoreFloat(int64_t offset, float value) const {
    switch (dtype()) {
      case MIXRT_DTYPE_F32:
        static_cast<float*>(data())[offset] = value;
        break;
      case MIXRT_DTYPE_F16:
        static_cast<uint16_t*>(data())[offset] = F32ToF16Bits(value);
        break;
      case MIXRT_DTYPE_BF16:
        static_cast<uint16_t*>(data())[offset] = F32ToBF16Bits(value);
        break;
      case MIXRT_DTYPE_BOOL:
        static_cast<uint8_t*>(data())[offset] = value != 0.0f ? 1 : 0;
        break;
      default:
        StoreInt(offset, FloatToInt64(value));
        break;
    }
  }

  // Stores an integer; i32 wraps modulo 2^32 as a C cast does.
  void StoreInt(int64_t offset, int64_t value) const {
    switch (dtype()) {
      case MIXRT_DTYPE_I32:
        static_cast<int32_t*>(data())[offset] = static_cast<int32_t>(value);
        break;
      case MIXRT_DTYPE_I64:
        static_cast<int64_t*>(data())[offset] = value;
        break;
      case MIXRT_DTYPE_BOOL:
        static_cast<uint8_t*>(data())[offset] = value != 0 ? 1 : 0;
        break;
      default:
        StoreFloat(offset, static_cast<float>(value));
        break;
    }
  }

  static int64_t FloatToInt64(float value) {
    if (value != value) return 0;
    if (value >= 9.2233720368547758e18f) return INT64_MAX;
    if (value <= -9.2233720368547758e18f) return INT64_MIN;
    return static_cast<int64_t>(value);
  }

 private:
  const MixrtTensorDesc* desc_;
};

// Bytes per element of `dtype`.
inline size_t DtypeBytes(MixrtDtype dtype) {
  switch (dtype) {
    case MIXRT_DTYPE_F16:
    case MIXRT_DTYPE_BF16:
      return 2;
    case MIXRT_DTYPE_I64:
      return 8;
    case MIXRT_DTYPE_BOOL:
      return 1;
    default:
      return 4;
  }
}

// "f32", "bf16", ...: the dtype as messages and Explain() name it.
inline const char* DtypeName(MixrtDtype dtype) {
  switch (dtype) {
    case MIXRT_DTYPE_F32:
      return "f32";
    case MIXRT_DTYPE_F16:
      return "f16";
    case MIXRT_DTYPE_BF16:
      return "bf16";
    case MIXRT_DTYPE_I32:
      return "i32";
    case MIXRT_DTYPE_I64:
      return "i64";
    case MIXRT_DTYPE_BOOL:
      return "bool";
    default:
      return "unknown dtype";
  }
}

inline bool IsFloatingDtype(MixrtDtype dtype) {
  return dtype == MIXRT_DTYPE_F32 || dtype == MIXRT_DTYPE_F16 ||
         dtype == MIXRT_DTYPE_BF16;
}

// Calls fn(offsets) for every element of `shape` in row-major order, where
// offsets[t] is the element offset into tensor t (given its strides).
template <int kTensors, typename Fn>
void ForEachElement(int ndim, const int64_t* shape,
                    const std::array<const int64_t*, kTensors>& strides,
                    Fn&& fn) {
  int64_t total = 1;
  for (int i = 0; i < ndim; ++i) total *= shape[i];
  if (total == 0) return;
  std::array<int64_t, MIXRT_MAX_DIMS> index{};
  std::array<int64_t, kTensors> offsets{};
  for (int64_t n = 0; n < total; ++n) {
    fn(static_cast<const std::array<int64_t, kTensors>&>(offsets));
    // Odometer increment from the innermost dimension.
    for (int d = ndim - 1; d >= 0; --d) {
      ++index[d];
      for (int t = 0; t < kTensors; ++t) offsets[t] += strides[t][d];
      if (index[d] < shape[d]) break;
      for (int t = 0; t < kTensors; ++t) offsets[t] -= strides[t][d] * shape[d];
      index[d] = 0;
    }
  }
}

}  // namespace mixrt::sdk

#endif  // MIXRT_PLUGINS_SDK_TENSOR_REF_H_
