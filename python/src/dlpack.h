// The DLPack 1.0 structures (dmlc/dlpack's dlpack.h, Apache-2.0), as the
// Python array API's __dlpack__ protocol passes them in capsules:
// "dltensor" (DLManagedTensor, the unversioned protocol NumPy < 2 speaks)
// and "dltensor_versioned" (DLManagedTensorVersioned, with flags).
#ifndef MIXRT_PYTHON_SRC_DLPACK_H_
#define MIXRT_PYTHON_SRC_DLPACK_H_

#include <cstdint>

namespace mixrt::python::dlpack {

inline constexpr uint32_t kMajorVersion = 1;
inline constexpr uint32_t kMinorVersion = 0;
inline constexpr uint64_t kFlagReadOnly = 1u << 0;
inline constexpr uint64_t kFlagIsCopied = 1u << 1;

enum DeviceType : int32_t { kDLCPU = 1, kDLCUDA = 2, kDLCUDAHost = 3 };
enum DataTypeCode : uint8_t {
  kDLInt = 0,
  kDLUInt = 1,
  kDLFloat = 2,
  kDLBfloat = 4,
  kDLBool = 6,
};

struct DLDevice {
  int32_t device_type;
  int32_t device_id;
};
struct DLDataType {
  uint8_t code;
  uint8_t bits;
  uint16_t lanes;
};
struct DLTensor {
  void* data;
  DLDevice device;
  int32_t ndim;
  DLDataType dtype;
  int64_t* shape;
  int64_t* strides;  // In elements; null: C-contiguous.
  uint64_t byte_offset;
};
struct DLManagedTensor {
  DLTensor dl_tensor;
  void* manager_ctx;
  void (*deleter)(DLManagedTensor* self);
};
struct DLPackVersion {
  uint32_t major;
  uint32_t minor;
};
struct DLManagedTensorVersioned {
  DLPackVersion version;
  void* manager_ctx;
  void (*deleter)(DLManagedTensorVersioned* self);
  uint64_t flags;
  DLTensor dl_tensor;
};

}  // namespace mixrt::python::dlpack

#endif  // MIXRT_PYTHON_SRC_DLPACK_H_
