#include "core/allocator/caching_allocator.h"

#include <algorithm>
#include <mutex>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"

namespace mixrt {

CachingAllocator::~CachingAllocator() {
  std::lock_guard<std::mutex> lock(mu_);
  ReleaseCacheLocked();
}

uint64_t CachingAllocator::RoundSize(uint64_t bytes) {
  if (bytes <= kRoundBytes) return kRoundBytes;
  if (bytes > UINT64_MAX - kRoundBytes) return 0;  // Overflows: refused.
  return (bytes + kRoundBytes - 1) / kRoundBytes * kRoundBytes;
}

absl::StatusOr<void*> CachingAllocator::Allocate(uint64_t bytes) {
  const uint64_t size = RoundSize(bytes);
  // Named only in an error: every op allocates, and a string per call was
  // a measurable part of a small op.
  auto where = [&] { return absl::StrCat(memory_->name(), ":", device_); };
  if (size == 0) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "cannot allocate ", bytes, " bytes on ", where(), ": size overflows"));
  }
  std::lock_guard<std::mutex> lock(mu_);
  void* ptr = nullptr;
  auto cached = free_blocks_.find(size);
  if (cached != free_blocks_.end() && !cached->second.empty()) {
    // The most recently freed block of the size: the likeliest in cache.
    ptr = cached->second.back();
    cached->second.pop_back();
    stats_.bytes_cached -= size;
  } else {
    absl::StatusOr<void*> fresh = memory_->Allocate(device_, size);
    if (!fresh.ok() && absl::IsResourceExhausted(fresh.status()) &&
        stats_.bytes_cached > 0) {
      ReleaseCacheLocked();
      fresh = memory_->Allocate(device_, size);
    }
    if (!fresh.ok()) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "cannot allocate ", bytes, " bytes on ", where(), " (",
          stats_.bytes_in_use, " bytes in use): ", fresh.status().message()));
    }
    ptr = *fresh;
    ++stats_.num_plugin_allocations;
  }
  live_blocks_[ptr] = size;
  ++stats_.num_allocations;
  stats_.bytes_in_use += size;
  stats_.peak_bytes_in_use =
      std::max(stats_.peak_bytes_in_use, stats_.bytes_in_use);
  return ptr;
}

void CachingAllocator::Free(void* ptr) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = live_blocks_.find(ptr);
  if (it == live_blocks_.end()) return;  // Not ours: ignore, never corrupt.
  const uint64_t size = it->second;
  live_blocks_.erase(it);
  stats_.bytes_in_use -= size;
  stats_.bytes_cached += size;
  // The per-size list keeps its capacity: no allocation per free.
  free_blocks_[size].push_back(ptr);
}

void CachingAllocator::EmptyCache() {
  std::lock_guard<std::mutex> lock(mu_);
  ReleaseCacheLocked();
}

void CachingAllocator::ReleaseCacheLocked() {
  for (const auto& [size, ptrs] : free_blocks_) {
    for (void* ptr : ptrs) {
      // A failing free cannot be reported from a destructor path; the
      // block is forgotten either way so it is never handed out twice.
      memory_->Free(device_, ptr).IgnoreError();
      ++stats_.num_plugin_frees;
    }
  }
  free_blocks_.clear();
  stats_.bytes_cached = 0;
}

AllocatorStats CachingAllocator::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

void CachingAllocator::ResetPeak() {
  std::lock_guard<std::mutex> lock(mu_);
  stats_.peak_bytes_in_use = stats_.bytes_in_use;
}

}  // namespace mixrt
