#include "core/plugin/isolation/arena_allocator.h"

namespace mixrt::isolation {

ArenaAllocator::ArenaAllocator(uint64_t capacity, uint64_t granule)
    : capacity_(capacity / granule * granule), granule_(granule) {
  if (capacity_ > 0) free_[0] = capacity_;
}

std::optional<uint64_t> ArenaAllocator::Allocate(uint64_t bytes,
                                                 uint64_t alignment) {
  if (bytes == 0 || bytes > capacity_) return std::nullopt;
  if (alignment < granule_) alignment = granule_;
  const uint64_t rounded = (bytes + granule_ - 1) / granule_ * granule_;
  std::lock_guard<std::mutex> lock(mu_);
  for (auto it = free_.begin(); it != free_.end(); ++it) {
    const uint64_t start = it->first;
    const uint64_t end = start + it->second;
    const uint64_t offset = (start + alignment - 1) / alignment * alignment;
    if (offset > end || end - offset < rounded) continue;
    free_.erase(it);
    // What is left before and after the range stays free.
    if (offset > start) free_[start] = offset - start;
    if (end > offset + rounded)
      free_[offset + rounded] = end - offset - rounded;
    used_[offset] = rounded;
    in_use_ += rounded;
    return offset;
  }
  return std::nullopt;
}

uint64_t ArenaAllocator::Free(uint64_t offset) {
  std::lock_guard<std::mutex> lock(mu_);
  auto used = used_.find(offset);
  if (used == used_.end()) return 0;
  const uint64_t bytes = used->second;
  used_.erase(used);
  in_use_ -= bytes;
  uint64_t start = offset;
  uint64_t size = bytes;
  auto next = free_.lower_bound(offset);
  if (next != free_.end() && next->first == offset + bytes) {
    size += next->second;
    next = free_.erase(next);
  }
  if (next != free_.begin()) {
    auto prev = std::prev(next);
    if (prev->first + prev->second == offset) {
      start = prev->first;
      size += prev->second;
      free_.erase(prev);
    }
  }
  free_[start] = size;
  return bytes;
}

uint64_t ArenaAllocator::bytes_in_use() const {
  std::lock_guard<std::mutex> lock(mu_);
  return in_use_;
}

}  // namespace mixrt::isolation
