#include "core/tensor/storage.h"

#include "absl/status/statusor.h"
#include "core/allocator/caching_allocator.h"
#include "core/tensor/capture_hooks.h"

namespace mixrt {

absl::StatusOr<std::shared_ptr<Storage>> Storage::Allocate(const Device& device,
                                                           uint64_t bytes) {
  absl::StatusOr<void*> data =
      device.backend()->allocator(device.index()).Allocate(bytes);
  if (!data.ok()) return data.status();
  std::shared_ptr<Storage> storage(new Storage(device, *data, bytes));
  if (CaptureHooks* hooks = ActiveCaptureHooks()) hooks->OnAllocate(storage);
  return storage;
}

uint64_t Storage::NextStamp() {
  static std::atomic<uint64_t> clock{1};
  return clock.fetch_add(1, std::memory_order_relaxed);
}

uint64_t Storage::UnprovenVersion() {
  static std::atomic<uint64_t> next{uint64_t{1} << 63};
  return next.fetch_add(1, std::memory_order_relaxed);
}

std::shared_ptr<Storage> Storage::Adopt(const Device& device, void* data,
                                        uint64_t bytes,
                                        std::function<void()> release) {
  std::shared_ptr<Storage> storage(new Storage(device, data, bytes));
  storage->release_ =
      release != nullptr ? std::move(release) : std::function<void()>([] {});
  // A replay could not adopt the next call's memory: the trace would
  // read this call's for ever. The function runs eagerly instead.
  ReportUntraceable("memory adopted from outside mixrt (from_dlpack)");
  return storage;
}

Storage::~Storage() {
  if (release_ != nullptr) {
    release_();
    return;
  }
  device_.backend()->allocator(device_.index()).Free(data_);
}

}  // namespace mixrt
