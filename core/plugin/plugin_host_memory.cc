// The out-of-process plugin's memory and launches (plugin_host_process.h).
#include <fcntl.h>

#include <algorithm>
#include <cstring>
#include <optional>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/dtype.h"
#include "core/plugin/plugin_host_process.h"
#include "mixrt/op_names.h"

namespace mixrt::isolation {
namespace {

// An unknown dtype counts as the widest: the plugin refuses the launch
// anyway, and no copy may come out short.
size_t DtypeBytes(uint32_t dtype) {
  return dtype < MIXRT_DTYPE_COUNT ? DTypeSize(static_cast<DType>(dtype)) : 8;
}

// The bytes a descriptor reaches, [lo, hi); false when it has no elements.
bool TensorExtent(const MixrtTensorDesc& d, uintptr_t* lo, uintptr_t* hi) {
  if (d.data == nullptr) return false;
  int64_t last = 0;
  for (int i = 0; i < d.ndim; ++i) {
    if (d.shape[i] <= 0) return false;
    last += (d.shape[i] - 1) * d.strides[i];
  }
  *lo = reinterpret_cast<uintptr_t>(d.data);
  *hi = *lo + static_cast<uintptr_t>(last + 1) * DtypeBytes(d.dtype);
  return true;
}

}  // namespace

// ---------------------------------------------------------------------------
// Memory.

MixrtError* PluginHostProcess::Allocate(MixrtMemory_Allocate_Args* a) {
  if (failed_.load(std::memory_order_acquire)) return Unavailable();
  a->ptr = nullptr;
  if (a->bytes == 0) return nullptr;
  if (HostMemory(a->device)) {
    std::optional<uint64_t> offset =
        arena_ranges_->Allocate(a->bytes, alignment_[a->device]);
    if (!offset.has_value()) {
      return MakeError(
          MIXRT_ERROR_CODE_OUT_OF_MEMORY,
          absl::StrCat("the shared arena (", arena_bytes_, " bytes, ",
                       arena_ranges_->bytes_in_use(),
                       " in use) has no free range of ", a->bytes, " bytes"));
    }
    a->ptr = arena_ + *offset;
    return nullptr;
  }
  return Ask(
      Call::kAllocate, "memory_allocate",
      [&](MessageWriter& w) {
        w.Put(a->device);
        w.Put(a->bytes);
      },
      [&](MessageReader& r) {
        uint64_t handle = 0;
        if (!r.Get(&handle)) return false;
        a->ptr = reinterpret_cast<void*>(handle);
        return true;
      });
}

void PluginHostProcess::ReleaseRange(uint64_t offset, uint64_t bytes) {
  if (bytes >= kReleaseBytes) {
    fallocate(arena_fd_, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
              static_cast<off_t>(offset), static_cast<off_t>(bytes));
  }
}

MixrtError* PluginHostProcess::Free(MixrtMemory_Free_Args* a) {
  if (a->ptr == nullptr) return nullptr;
  const auto p = reinterpret_cast<uintptr_t>(a->ptr);
  if (HostMemory(a->device)) {
    if (!InArena(p, p)) {
      return MakeError(MIXRT_ERROR_CODE_INVALID_ARGUMENT,
                       "memory_free: the pointer is not from memory_allocate");
    }
    const uint64_t offset = p - reinterpret_cast<uintptr_t>(arena_);
    ReleaseRange(offset, arena_ranges_->Free(offset));
    return nullptr;
  }
  // A failed process took its device memory with it: nothing to free.
  if (failed_.load(std::memory_order_acquire)) return nullptr;
  const int32_t device = a->device;
  const WireRef ref = DeviceRef(a->ptr);
  return Simple(Call::kFree, "memory_free", [&](MessageWriter& w) {
    w.Put(device);
    w.Put(ref);
  });
}

MixrtError* PluginHostProcess::Copy(MixrtMemory_Copy_Args* a) {
  if (a->bytes == 0) return nullptr;
  if (!HostMemory(a->device)) return CopyThroughStaging(a);
  const auto dst = reinterpret_cast<uintptr_t>(a->dst);
  const auto src = reinterpret_cast<uintptr_t>(a->src);
  if (InArena(dst, dst + a->bytes) && InArena(src, src + a->bytes)) {
    const int32_t device = a->device;
    const uint32_t kind = a->kind;
    const WireRef d = ArenaRef(a->dst), s = ArenaRef(a->src);
    const uint64_t bytes = a->bytes;
    return Simple(Call::kCopy, "memory_copy", [&](MessageWriter& w) {
      w.Put(device);
      w.Put(kind);
      w.Put(d);
      w.Put(s);
      w.Put(bytes);
    });
  }
  // One side is this process's memory: once the plugin has finished what
  // it was asked before (issue order), the copy is this side's to make.
  if (MixrtError* e = SynchronizeDevice(a->device)) return e;
  std::memmove(a->dst, a->src, a->bytes);
  return nullptr;
}

MixrtError* PluginHostProcess::CopyThroughStaging(MixrtMemory_Copy_Args* a) {
  std::lock_guard<std::mutex> lock(call_mu_);
  if (failed_.load(std::memory_order_acquire)) return Unavailable();
  if (a->kind == MIXRT_COPY_DEVICE_TO_DEVICE) {
    MessageWriter w(block_->payload);
    w.Put(a->device);
    w.Put(a->kind);
    w.Put(DeviceRef(a->dst));
    w.Put(DeviceRef(a->src));
    w.Put(a->bytes);
    std::optional<MessageReader> r;
    return Exchange(Call::kCopy, w, "memory_copy", options_.call_timeout, &r);
  }
  if (!have_staging_) {
    std::optional<uint64_t> offset =
        arena_ranges_->Allocate(kStagingBytes, kArenaGranule);
    if (!offset.has_value()) {
      return MakeError(MIXRT_ERROR_CODE_OUT_OF_MEMORY,
                       "no arena range left to stage copies through");
    }
    staging_ = *offset;
    have_staging_ = true;
  }
  const bool to_device = a->kind == MIXRT_COPY_HOST_TO_DEVICE;
  for (uint64_t done = 0; done < a->bytes; done += kStagingBytes) {
    const uint64_t piece = std::min(kStagingBytes, a->bytes - done);
    unsigned char* stage = arena_ + staging_;
    if (to_device) {
      std::memcpy(stage, static_cast<const unsigned char*>(a->src) + done,
                  piece);
    }
    MessageWriter w(block_->payload);
    w.Put(a->device);
    w.Put(a->kind);
    w.Put(to_device ? DeviceRef(static_cast<unsigned char*>(a->dst) + done)
                    : ArenaRef(stage));
    w.Put(to_device
              ? ArenaRef(stage)
              : DeviceRef(static_cast<const unsigned char*>(a->src) + done));
    w.Put(piece);
    std::optional<MessageReader> r;
    if (MixrtError* e = Exchange(Call::kCopy, w, "memory_copy",
                                 options_.call_timeout, &r)) {
      return e;
    }
    if (!to_device) {
      std::memcpy(static_cast<unsigned char*>(a->dst) + done, stage, piece);
    }
  }
  return nullptr;
}

MixrtError* PluginHostProcess::Set(MixrtMemory_Set_Args* a) {
  if (a->bytes == 0) return nullptr;
  const auto dst = reinterpret_cast<uintptr_t>(a->dst);
  const bool host = HostMemory(a->device);
  const bool plugin_sets = (table_bits_ & isolation::kHasMemorySet) != 0;
  // This process's memory, or host memory the plugin cannot set: once the
  // plugin has finished what it was asked before, this side sets it.
  if (host && (!InArena(dst, dst + a->bytes) || !plugin_sets)) {
    if (MixrtError* e = SynchronizeDevice(a->device)) return e;
    std::memset(a->dst, a->value, a->bytes);
    return nullptr;
  }
  if (!plugin_sets) {
    return MakeError(MIXRT_ERROR_CODE_UNIMPLEMENTED,
                     "the plugin has no memory_set");
  }
  const int32_t device = a->device;
  const WireRef ref = host ? ArenaRef(a->dst) : DeviceRef(a->dst);
  const uint8_t value = a->value;
  const uint64_t bytes = a->bytes;
  return Simple(Call::kSet, "memory_set", [&](MessageWriter& w) {
    w.Put(device);
    w.Put(ref);
    w.Put(value);
    w.Put(bytes);
  });
}

// ---------------------------------------------------------------------------
// Launches.

MixrtError* PluginHostProcess::Launch(MixrtKernel_Launch_Args* a) {
  const int32_t count = a->num_inputs + a->num_outputs;
  if (a->num_inputs < 0 || a->num_outputs < 0 ||
      count > isolation::kMaxLaunchTensors) {
    return MakeError(
        MIXRT_ERROR_CODE_INVALID_ARGUMENT,
        absl::StrCat("kernel_launch: ", count, " tensors (at most ",
                     isolation::kMaxLaunchTensors, ")"));
  }
  const bool host = HostMemory(a->device);
  const auto desc = [a](int32_t i) -> const MixrtTensorDesc& {
    return i < a->num_inputs ? a->inputs[i] : a->outputs[i - a->num_inputs];
  };
  // Host memory outside the arena (another host device's tensors) is copied
  // into it for the launch: merged ranges, so aliasing views stay aliased.
  struct Staged {
    uintptr_t lo, hi;
    uint64_t offset;
    bool written;
  };
  std::vector<Staged> staged;
  if (host) {
    for (int32_t i = 0; i < count; ++i) {
      uintptr_t lo, hi;
      if (!TensorExtent(desc(i), &lo, &hi) || InArena(lo, hi)) continue;
      staged.push_back({lo, hi, 0, i >= a->num_inputs});
    }
    std::sort(staged.begin(), staged.end(),
              [](const Staged& x, const Staged& y) { return x.lo < y.lo; });
    std::vector<Staged> merged;
    for (const Staged& s : staged) {
      if (!merged.empty() && s.lo < merged.back().hi) {
        merged.back().hi = std::max(merged.back().hi, s.hi);
        merged.back().written |= s.written;
      } else {
        merged.push_back(s);
      }
    }
    staged = std::move(merged);
    for (Staged& s : staged) {
      std::optional<uint64_t> offset =
          arena_ranges_->Allocate(s.hi - s.lo, kArenaGranule);
      if (!offset.has_value()) {
        for (const Staged& done : staged) {
          if (&done == &s) break;
          arena_ranges_->Free(done.offset);
        }
        return MakeError(MIXRT_ERROR_CODE_OUT_OF_MEMORY,
                         "no arena range left to stage a launch's operands");
      }
      s.offset = *offset;
      std::memcpy(arena_ + s.offset, reinterpret_cast<const void*>(s.lo),
                  s.hi - s.lo);
    }
  }
  const auto where = [&](const MixrtTensorDesc& d) -> WireRef {
    if (d.data == nullptr) return WireRef{};
    if (!host) return DeviceRef(d.data);
    const auto p = reinterpret_cast<uintptr_t>(d.data);
    for (const Staged& s : staged) {
      if (p >= s.lo && p < s.hi) {
        return WireRef{static_cast<uint32_t>(Space::kArena), 0,
                       s.offset + (p - s.lo)};
      }
    }
    if (!InArena(p, p)) return WireRef{};  // No elements: never read.
    return ArenaRef(d.data);
  };
  MixrtError* error = nullptr;
  {
    std::lock_guard<std::mutex> lock(call_mu_);
    MessageWriter w(block_->payload);
    w.Put(a->device);
    w.Put(a->op);
    w.Put(a->num_inputs);
    w.Put(a->num_outputs);
    for (int32_t i = 0; i < count; ++i) {
      const MixrtTensorDesc& d = desc(i);
      WireTensorDesc wd;
      wd.data = where(d);
      wd.dtype = d.dtype;
      wd.ndim = std::max(0, std::min<int32_t>(d.ndim, MIXRT_MAX_DIMS));
      for (int k = 0; k < wd.ndim; ++k) {
        wd.shape[k] = d.shape[k];
        wd.strides[k] = d.strides[k];
      }
      w.Put(wd);
    }
    const uint32_t attr_bytes = AttrSize(a->attrs);
    w.Put(attr_bytes);
    w.PutBytes(a->attrs, attr_bytes);
    ++launches_;
    std::optional<MessageReader> r;
    error = Exchange(Call::kLaunch, w, MixrtOpName(static_cast<MixrtOp>(a->op)),
                     options_.call_timeout, &r, kDefaultSpin, launches_);
  }
  if (!staged.empty()) {
    if (error == nullptr) {
      error = SynchronizeDevice(a->device);
    }
    for (const Staged& s : staged) {
      if (error == nullptr && s.written) {
        std::memcpy(reinterpret_cast<void*>(s.lo), arena_ + s.offset,
                    s.hi - s.lo);
      }
      arena_ranges_->Free(s.offset);
    }
  }
  return error;
}

}  // namespace mixrt::isolation
