// The mixrt plugin SDK: implement a backend by filling a C++ class instead of
// the raw C tables of plugin_api.h. The SDK builds the MixrtPluginApi table,
// turns absl::Status into ABI error objects, catches every exception at the
// boundary, and keeps returned strings alive for the plugin's lifetime.
//
//   class MyPlugin : public mixrt::sdk::HostMemoryPlugin {
//    public:
//     mixrt::sdk::PluginInfo Info() const override {
//       return {"mine", "0.1", "portable C++", "cpu"};
//     }
//     mixrt::sdk::Capability GetCapability(int, MixrtOpClass,
//                                          MixrtDtype) override { ... }
//     absl::Status Launch(const mixrt::sdk::KernelCall& call) override { ... }
//   };
//   MIXRT_SDK_DEFINE_PLUGIN(MyPlugin)
//
// Build it with mixrt_plugin() from plugins/sdk/plugin.bzl. plugins/README.md
// walks through a complete example.
#ifndef MIXRT_PLUGINS_SDK_PLUGIN_H_
#define MIXRT_PLUGINS_SDK_PLUGIN_H_

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "mixrt/plugin_api.h"
#include "plugins/sdk/tensor_ref.h"

namespace mixrt::sdk {

struct PluginInfo {
  std::string name;         // Short backend name: "cpu", "cuda".
  std::string version;      // The plugin's own version.
  std::string build_info;   // Vendor libraries and targets it was built for.
  std::string device_type;  // Autocast policy family: "cpu" or "cuda".
};

struct DeviceProperties {
  std::string name;
  uint64_t total_memory = 0;
  uint32_t flags = 0;  // MIXRT_DEVICE_FLAG_*
  uint32_t alignment = 64;
};

struct Capability {
  MixrtSupportLevel level = MIXRT_SUPPORT_UNSUPPORTED;
  std::string reason;
  double speed_vs_f32 = 0.0;  // 0 when not measured.
};

inline Capability Unsupported(std::string reason) {
  return {MIXRT_SUPPORT_UNSUPPORTED, std::move(reason), 0.0};
}

struct DeviceCount {
  int count = 0;
  std::string no_device_reason;  // Why, when count is 0.
};

// One kernel launch, with the descriptors wrapped for convenient access.
struct KernelCall {
  int device = 0;
  MixrtOp op = MIXRT_OP_FILL;
  std::vector<TensorRef> inputs;
  std::vector<TensorRef> outputs;
  const void* attrs = nullptr;

  // The op's attribute struct, checked for presence and minimum size.
  template <typename Attrs>
  absl::StatusOr<const Attrs*> GetAttrs() const {
    const auto* a = static_cast<const Attrs*>(attrs);
    if (a == nullptr || a->struct_size < sizeof(Attrs)) {
      return absl::InvalidArgumentError(
          "kernel attributes missing or smaller than the plugin expects");
    }
    return a;
  }
};

// Every method may be called from many threads at once after Initialize
// (see plugin_api.h); implementations synchronize their own state.
class Plugin {
 public:
  virtual ~Plugin() = default;

  virtual PluginInfo Info() const = 0;
  virtual absl::Status Initialize() { return absl::OkStatus(); }
  virtual absl::Status Shutdown() { return absl::OkStatus(); }

  virtual DeviceCount CountDevices() = 0;
  virtual absl::StatusOr<DeviceProperties> GetDeviceProperties(int device) = 0;
  virtual Capability GetCapability(int device, MixrtOpClass op_class,
                                   MixrtDtype dtype) = 0;

  virtual absl::StatusOr<void*> Allocate(int device, uint64_t bytes) = 0;
  virtual absl::Status Free(int device, void* ptr) = 0;
  virtual absl::Status Copy(int device, MixrtCopyKind kind, void* dst,
                            const void* src, uint64_t bytes) = 0;
  virtual absl::Status Memset(int device, void* dst, uint8_t value,
                              uint64_t bytes) = 0;
  virtual absl::Status Synchronize(int device) = 0;

  virtual absl::Status Launch(const KernelCall& call) = 0;
};

// A plugin whose "device" is host memory (CPU backends, the reference
// plugin): memory functions are aligned malloc and memcpy.
class HostMemoryPlugin : public Plugin {
 public:
  static constexpr uint32_t kAlignment = 64;

  absl::StatusOr<void*> Allocate(int device, uint64_t bytes) override;
  absl::Status Free(int device, void* ptr) override;
  absl::Status Copy(int device, MixrtCopyKind kind, void* dst, const void* src,
                    uint64_t bytes) override;
  absl::Status Memset(int device, void* dst, uint8_t value,
                      uint64_t bytes) override;
  absl::Status Synchronize(int device) override;
};

namespace internal {
using PluginFactory = Plugin* (*)();
// Builds (once) and returns the table for the plugin made by `factory`.
const MixrtPluginApi* GetApi(PluginFactory factory);
}  // namespace internal

}  // namespace mixrt::sdk

#define MIXRT_SDK_EXPORT extern "C" __attribute__((visibility("default")))

// Defines the plugin's entry symbol for PluginClass (default-constructible).
#define MIXRT_SDK_DEFINE_PLUGIN(PluginClass)                          \
  MIXRT_SDK_EXPORT const MixrtPluginApi* mixrt_plugin_entry(          \
      uint32_t /*host_major*/, uint32_t /*host_minor*/) {             \
    return ::mixrt::sdk::internal::GetApi(                            \
        []() -> ::mixrt::sdk::Plugin* { return new PluginClass(); }); \
  }

// Defines the optional score symbol from an `int32_t fn()`.
#define MIXRT_SDK_DEFINE_SCORE(score_fn) \
  MIXRT_SDK_EXPORT int32_t mixrt_plugin_score(void) { return score_fn(); }

#endif  // MIXRT_PLUGINS_SDK_PLUGIN_H_
