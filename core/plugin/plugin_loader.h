// Loads one plugin shared object and validates everything it returns before
// trusting it: the entry symbol, the ABI version, the table's struct_size and
// required functions, identity strings, device and capability data.
#ifndef MIXRT_CORE_PLUGIN_PLUGIN_LOADER_H_
#define MIXRT_CORE_PLUGIN_PLUGIN_LOADER_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "core/plugin/backend.h"

namespace mixrt {

// Returns the initialized backend, or a Status saying what was wrong with the
// file (the message names the path and what was expected). A backend with
// zero devices is returned too; its no_device_reason() says why.
absl::StatusOr<std::unique_ptr<Backend>> LoadPlugin(const std::string& path);

}  // namespace mixrt

#endif  // MIXRT_CORE_PLUGIN_PLUGIN_LOADER_H_
