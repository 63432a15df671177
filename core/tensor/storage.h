// Refcounted device memory behind tensors; returns its block to the device's
// caching allocator when the last tensor viewing it goes away.
#ifndef MIXRT_CORE_TENSOR_STORAGE_H_
#define MIXRT_CORE_TENSOR_STORAGE_H_

#include <atomic>
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
  // Counts writes through the runtime (kernel launches that output to this
  // memory, checkpoint loads, Tensor::data_ptr() handed out for writing),
  // as PyTorch's version counter counts in-place ops: what autocast's
  // cached weight casts and a compiled graph's folded weight casts check.
  uint64_t version() const { return version_.load(std::memory_order_acquire); }
  void BumpVersion() { version_.fetch_add(1, std::memory_order_acq_rel); }

 private:
  Storage(Device device, void* data, uint64_t bytes)
      : device_(device), data_(data), bytes_(bytes) {}

  Device device_;
  void* data_;
  uint64_t bytes_;
  std::atomic<uint64_t> version_{0};
};

}  // namespace mixrt

#endif  // MIXRT_CORE_TENSOR_STORAGE_H_
