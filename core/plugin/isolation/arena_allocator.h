// Ranges of the shared arena (one memfd mapped in the host process and in
// the plugin host): what an isolated host-memory plugin's tensors live in.
// First fit over free ranges kept by offset, neighbours merged on free; the
// core's caching allocator sits above it, so calls are few and large.
#ifndef MIXRT_CORE_PLUGIN_ISOLATION_ARENA_ALLOCATOR_H_
#define MIXRT_CORE_PLUGIN_ISOLATION_ARENA_ALLOCATOR_H_

#include <cstdint>
#include <iterator>
#include <map>
#include <mutex>
#include <optional>

namespace mixrt::isolation {

class ArenaAllocator {
 public:
  // Every range starts and ends on a multiple of `granule` (a power of 2).
  ArenaAllocator(uint64_t capacity, uint64_t granule);

  // The offset of `bytes` (> 0), a multiple of `alignment` (a power of 2),
  // or nullopt when no free range is large enough.
  std::optional<uint64_t> Allocate(uint64_t bytes, uint64_t alignment);
  // The size of the range freed at `offset`, or 0 when `offset` is not an
  // allocation (nothing changes then).
  uint64_t Free(uint64_t offset);
  uint64_t capacity() const { return capacity_; }
  uint64_t bytes_in_use() const;

 private:
  const uint64_t capacity_;
  const uint64_t granule_;
  mutable std::mutex mu_;
  std::map<uint64_t, uint64_t> free_;  // offset -> bytes
  std::map<uint64_t, uint64_t> used_;  // offset -> bytes
  uint64_t in_use_ = 0;
};

}  // namespace mixrt::isolation

#endif  // MIXRT_CORE_PLUGIN_ISOLATION_ARENA_ALLOCATOR_H_
