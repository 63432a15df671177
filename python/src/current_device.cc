#include "python/src/current_device.h"

#include <mutex>
#include <optional>

#include "python/src/status_to_python.h"

namespace mixrt::python {
namespace {

std::mutex g_mu;
std::optional<Device> g_current;  // Guarded by g_mu.

}  // namespace

Registry& LoadedRegistry() {
  static std::once_flag loaded;
  Registry& registry = Registry::Global();
  std::call_once(loaded, [&] { registry.LoadAll(); });
  return registry;
}

Device CurrentDevice() {
  std::lock_guard<std::mutex> lock(g_mu);
  if (!g_current.has_value()) {
    g_current = ValueOrThrow(LoadedRegistry().SelectDevice());
  }
  return *g_current;
}

void SelectCurrentDevice(const std::string& backend) {
  Device device = ValueOrThrow(LoadedRegistry().SelectDevice(backend));
  std::lock_guard<std::mutex> lock(g_mu);
  g_current = device;
}

Device HostMemoryDevice() {
  const Device current = CurrentDevice();
  if (current.has_flag(MIXRT_DEVICE_FLAG_HOST_MEMORY)) return current;
  for (const Backend* backend : LoadedRegistry().UsableBackends()) {
    for (size_t i = 0; i < backend->devices().size(); ++i) {
      const Device device(backend, static_cast<int>(i));
      if (device.has_flag(MIXRT_DEVICE_FLAG_HOST_MEMORY)) return device;
    }
  }
  throw std::runtime_error(
      "no usable backend keeps tensors in host memory (needed to share a "
      "NumPy or DLPack array's memory); mixrt.backends.info() lists them");
}

}  // namespace mixrt::python
