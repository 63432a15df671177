#include "core/tensor/storage.h"

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

Storage::~Storage() {
  device_.backend()->allocator(device_.index()).Free(data_);
}

}  // namespace mixrt
