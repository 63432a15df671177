// What the host process and mixrt-plugin-host say to each other over the
// shared channel (shared_channel.h): one call at a time, each a request the
// host writes and a response the plugin host writes back. Both sides are
// built from this tree; the channel's version refuses a mismatched pair.
#ifndef MIXRT_CORE_PLUGIN_ISOLATION_WIRE_FORMAT_H_
#define MIXRT_CORE_PLUGIN_ISOLATION_WIRE_FORMAT_H_

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "mixrt/plugin_api.h"

namespace mixrt::isolation {

// 2: requests and answers carry a sequence number (shared_channel.h).
inline constexpr uint32_t kWireVersion = 2;

// The file descriptors mixrt-plugin-host finds the channel and the arena at
// (inherited across exec).
inline constexpr int kChannelFd = 3;
inline constexpr int kArenaFd = 4;

// One per ABI function the isolated plugin serves (profiling ranges are not
// forwarded).
enum class Call : uint32_t {
  kHello = 1,  // Load the plugin; answer its table's shape and score.
  kGetInfo,
  kInitialize,
  kShutdown,
  kDeviceCount,
  kGetProperties,
  kGetCapability,
  kGetOpSupport,
  kGetMemoryInfo,
  kGetPrecisionSupport,
  kAllocate,
  kFree,
  kCopy,
  kSet,
  kSynchronize,
  kLaunch,
  kFusionClaim,
  kFusionCompile,
  kFusedRun,
  kFusedDestroy,
  kFusedSetWeightVersion,
  kFusedSetScratch,
  kGraphCreate,
  kGraphRun,
  kGraphDestroy,
};

// Where a pointer lives, as the other process can find it.
enum class Space : uint32_t {
  kNull = 0,
  kArena = 1,   // value: byte offset into the shared arena.
  kDevice = 2,  // value: the plugin's own device pointer (a handle here).
};

struct WireRef {
  uint32_t space = 0;  // Space
  uint32_t pad = 0;
  uint64_t value = 0;
};

struct WireTensorDesc {
  WireRef data;
  uint32_t dtype = 0;
  int32_t ndim = 0;
  int64_t shape[MIXRT_MAX_DIMS] = {};
  int64_t strides[MIXRT_MAX_DIMS] = {};
};

// Attribute structs are plain data after their header; none is larger.
inline constexpr uint32_t kMaxAttrBytes = 512;
// What of an attribute struct travels: its struct_size bytes, capped.
inline uint32_t AttrSize(const void* attrs) {
  if (attrs == nullptr) return 0;
  size_t size = 0;
  std::memcpy(&size, attrs, sizeof(size));
  return static_cast<uint32_t>(std::min<size_t>(size, kMaxAttrBytes));
}
// Inputs plus outputs of one launch (the multi-tensor ops carry many).
inline constexpr int32_t kMaxLaunchTensors = 4096;

// Which optional functions the plugin's table has (kHello's answer).
enum TableBits : uint32_t {
  kHasShutdown = 1u << 0,
  kHasMemorySet = 1u << 1,
  kHasOpSupport = 1u << 2,
  kHasMemoryInfo = 1u << 3,
  kHasPrecisionSupport = 1u << 4,
  kHasFusion = 1u << 5,  // All four fusion functions.
  kHasWeightVersion = 1u << 6,
  kHasScratch = 1u << 7,
  kHasKernelGraphs = 1u << 8,  // All three kernel graph functions.
};

}  // namespace mixrt::isolation

#endif  // MIXRT_CORE_PLUGIN_ISOLATION_WIRE_FORMAT_H_
