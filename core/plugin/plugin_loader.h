// Loads one plugin shared object and validates everything it returns before
// trusting it: the entry symbol, the ABI version, the table's struct_size and
// required functions, identity strings, device and capability data.
#ifndef MIXRT_CORE_PLUGIN_PLUGIN_LOADER_H_
#define MIXRT_CORE_PLUGIN_PLUGIN_LOADER_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "core/plugin/backend.h"

namespace mixrt {

// Returns the initialized backend, or a Status saying what was wrong with the
// file (the message names the path and what was expected). A backend with
// zero devices is returned too; its no_device_reason() says why.
absl::StatusOr<std::unique_ptr<Backend>> LoadPlugin(const std::string& path);

// The part of LoadPlugin after dlopen: validates the table a plugin's entry
// point returned, initializes it and reads its devices. `handle` (may be
// null) is kept open by the Backend; `score` is what mixrt_plugin_score
// returned, if the plugin exports it. Separate so that the validation can be
// fuzzed with synthetic tables (fuzz/plugin_table_fuzz.cc).
absl::StatusOr<std::unique_ptr<Backend>> BackendFromApiTable(
    const std::string& path, void* handle, const MixrtPluginApi* api,
    std::optional<int32_t> score);

}  // namespace mixrt

#endif  // MIXRT_CORE_PLUGIN_PLUGIN_LOADER_H_
