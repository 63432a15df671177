// Refcounted device memory behind tensors; returns its block to the device's
// caching allocator when the last tensor viewing it goes away.
#ifndef MIXRT_CORE_TENSOR_STORAGE_H_
#define MIXRT_CORE_TENSOR_STORAGE_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>

#include "absl/status/statusor.h"
#include "core/plugin/device.h"

namespace mixrt {

class Storage {
 public:
  static absl::StatusOr<std::shared_ptr<Storage>> Allocate(const Device& device,
                                                           uint64_t bytes);
  // Memory the caller owns (a NumPy array's, another framework's through
  // DLPack), used in place: `release` runs when the last tensor viewing it
  // goes, instead of a free to the device's allocator. Such memory can
  // change without mixrt's knowledge (the owner writes it), so its
  // version never proves it unchanged: see external().
  static std::shared_ptr<Storage> Adopt(const Device& device, void* data,
                                        uint64_t bytes,
                                        std::function<void()> release);
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  void* data() const { return data_; }
  uint64_t bytes() const { return bytes_; }
  const Device& device() const { return device_; }
  // Counts writes through the runtime (kernel launches that output to this
  // memory, checkpoint loads, Tensor::data_ptr() handed out for writing),
  // as PyTorch's version counter counts in-place ops: what autocast's
  // cached weight casts and a compiled graph's kept launches and fused
  // weight copies check. External memory (below) has no count that proves
  // it unchanged: its version is a new value at every ask, so nothing is
  // ever kept for it.
  //
  // Versions are stamps of one process-wide clock, not counts from 0: no
  // two storages ever report the same version, so "same version as when
  // it was cast" also proves "same memory". With per-storage counts a
  // weight rebound to a new tensor written as often as the old one (both
  // at 1) looked unchanged, and a compiled graph reused the old weight's
  // kept cast: a silent wrong result.
  uint64_t version() const {
    return external() ? UnprovenVersion()
                      : version_.load(std::memory_order_acquire);
  }
  void BumpVersion() {
    // The larger stamp wins a race of two writers: the version only grows.
    const uint64_t stamp = NextStamp();
    uint64_t seen = version_.load(std::memory_order_acquire);
    while (seen < stamp && !version_.compare_exchange_weak(
                               seen, stamp, std::memory_order_acq_rel)) {
    }
  }
  // Memory something outside mixrt can write: adopted, or handed out
  // (MarkShared: a NumPy view of it, a DLPack export). Such writes bump no
  // count, hence version()'s answer for it.
  bool external() const {
    return release_ != nullptr || shared_.load(std::memory_order_acquire);
  }
  void MarkShared() { shared_.store(true, std::memory_order_release); }

 private:
  Storage(Device device, void* data, uint64_t bytes)
      : device_(device), data_(data), bytes_(bytes) {}
  // Distinct from every counted version and from every earlier answer.
  static uint64_t UnprovenVersion();
  // The clock's next stamp (below UnprovenVersion's range).
  static uint64_t NextStamp();

  Device device_;
  void* data_;
  uint64_t bytes_;
  std::atomic<uint64_t> version_{NextStamp()};
  std::function<void()> release_;  // Set for adopted memory.
  std::atomic<bool> shared_{false};
};

}  // namespace mixrt

#endif  // MIXRT_CORE_TENSOR_STORAGE_H_
