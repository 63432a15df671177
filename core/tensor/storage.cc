#include "core/tensor/storage.h"

#include "core/allocator/caching_allocator.h"

namespace mixrt {

absl::StatusOr<std::shared_ptr<Storage>> Storage::Allocate(const Device& device,
                                                           uint64_t bytes) {
  absl::StatusOr<void*> data =
      device.backend()->allocator(device.index()).Allocate(bytes);
  if (!data.ok()) return data.status();
  return std::shared_ptr<Storage>(new Storage(device, *data, bytes));
}

Storage::~Storage() {
  device_.backend()->allocator(device_.index()).Free(data_);
}

}  // namespace mixrt
