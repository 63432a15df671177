// Refcounted device memory behind tensors; returns its block to the device's
// caching allocator when the last tensor viewing it goes away.
#ifndef MIXRT_CORE_TENSOR_STORAGE_H_
#define MIXRT_CORE_TENSOR_STORAGE_H_

#include <cstdint>
#include <memory>

#include "absl/status/statusor.h"
#include "core/plugin/device.h"

namespace mixrt {

class Storage {
 public:
  static absl::StatusOr<std::shared_ptr<Storage>> Allocate(const Device& device,
                                                           uint64_t bytes);
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  void* data() const { return data_; }
  uint64_t bytes() const { return bytes_; }
  const Device& device() const { return device_; }

 private:
  Storage(Device device, void* data, uint64_t bytes)
      : device_(device), data_(data), bytes_(bytes) {}

  Device device_;
  void* data_;
  uint64_t bytes_;
};

}  // namespace mixrt

#endif  // MIXRT_CORE_TENSOR_STORAGE_H_
