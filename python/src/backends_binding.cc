// mixrt.backends: the plugin registry (what was found and loaded, and why
// not), loading a plugin by path, choosing the current device, and
// `mixrt info --json`'s report.
#include <cstdint>
#include <string>
#include <vector>

#include "core/plugin/registry.h"
#include "nanobind/nanobind.h"
#include "nanobind/stl/string.h"
#include "python/src/bindings.h"
#include "python/src/current_device.h"
#include "python/src/status_to_python.h"
#include "tools/info/info_report.h"

namespace nb = nanobind;

namespace mixrt::python {

void BindBackends(nb::module_& m) {
  m.def("_info_json", [] { return tools::InfoJson(LoadedRegistry()).dump(); });
  m.def("_load_plugin", [](const std::string& path, bool isolate,
                           uint64_t arena_bytes) {
    LoadOptions options;
    if (isolate) options.isolation = "all";
    if (arena_bytes != 0) options.arena_bytes = arena_bytes;
    const Backend* backend = ValueOrThrow(LoadedRegistry().Load(path, options));
    return backend->name();
  });
  m.def("_select", &SelectCurrentDevice);
  m.def("_current_device", [] { return CurrentDevice().ToString(); });
  m.def("_usable_backends", [] {
    nb::list names;
    for (const Backend* b : LoadedRegistry().UsableBackends())
      names.append(b->name());
    return names;
  });
}

}  // namespace mixrt::python
