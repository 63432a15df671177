// A per-device caching allocator over a plugin's raw memory_allocate /
// memory_free. Freed blocks are kept, keyed by their rounded size, and handed
// out again: a training step asks for the same sizes every iteration, so
// after the first step no plugin allocation happens at all. On an
// out-of-memory error the cache is released and the allocation retried once.
//
// Statistics are what examples report as "max memory used by tensors".
// Thread-safe.
#ifndef MIXRT_CORE_ALLOCATOR_CACHING_ALLOCATOR_H_
#define MIXRT_CORE_ALLOCATOR_CACHING_ALLOCATOR_H_

#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace mixrt {

// The raw memory functions the allocator draws from (a backend's
// memory_allocate / memory_free). An interface, so the allocator sits below
// the plugin layer that implements it instead of calling up into Backend.
class RawDeviceMemory {
 public:
  virtual ~RawDeviceMemory() = default;
  virtual const std::string& name() const = 0;
  virtual absl::StatusOr<void*> Allocate(int device, uint64_t bytes) const = 0;
  virtual absl::Status Free(int device, void* ptr) const = 0;
};

struct AllocatorStats {
  uint64_t bytes_in_use = 0;  // Held by live tensors (rounded block sizes).
  uint64_t peak_bytes_in_use = 0;       // Since creation or ResetPeak().
  uint64_t bytes_cached = 0;            // Free blocks kept for reuse.
  uint64_t num_allocations = 0;         // Requests served.
  uint64_t num_plugin_allocations = 0;  // Requests that reached the plugin.
  uint64_t num_plugin_frees = 0;
};

class CachingAllocator {
 public:
  // Block sizes are multiples of this (and at least this).
  static constexpr uint64_t kRoundBytes = 512;

  CachingAllocator(const RawDeviceMemory* memory, int device)
      : memory_(memory), device_(device) {}
  ~CachingAllocator();
  CachingAllocator(const CachingAllocator&) = delete;
  CachingAllocator& operator=(const CachingAllocator&) = delete;

  // A block of at least `bytes` (0 gives a distinct minimal block). The
  // error names the bytes requested and the device.
  absl::StatusOr<void*> Allocate(uint64_t bytes);
  // Returns a block from Allocate() to the cache.
  void Free(void* ptr);
  // Gives every cached block back to the plugin.
  void EmptyCache();

  AllocatorStats stats() const;
  void ResetPeak();

  static uint64_t RoundSize(uint64_t bytes);

 private:
  void ReleaseCacheLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const RawDeviceMemory* memory_;
  int device_;
  // A std mutex, not absl::Mutex: Debian's Abseil is built without
  // ThreadSanitizer annotations, so TSan cannot see absl::Mutex's ordering
  // and reports every guarded access as a race; pthread locks it intercepts.
  mutable std::mutex mu_;
  // Free blocks by rounded size (lookups are exact).
  absl::flat_hash_map<uint64_t, std::vector<void*>> free_blocks_
      ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<void*, uint64_t> live_blocks_ ABSL_GUARDED_BY(mu_);
  AllocatorStats stats_ ABSL_GUARDED_BY(mu_);
};

}  // namespace mixrt

#endif  // MIXRT_CORE_ALLOCATOR_CACHING_ALLOCATOR_H_
