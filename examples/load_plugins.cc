#include "examples/load_plugins.h"

#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "core/bundled/bundled_plugins.h"
#include "core/plugin/registry.h"

ABSL_FLAG(std::vector<std::string>, plugin, {},
          "Plugin files to load as given (comma-separated), before the "
          "bundled ones, MIXRT_PLUGIN_PATH and those beside the program.");

namespace mixrt::examples {

void LoadPlugins(const char* argv0) {
  std::vector<std::string> paths = absl::GetFlag(FLAGS_plugin);
  for (const std::string& path : BundledPluginPaths(argv0)) {
    paths.push_back(path);
  }
  Registry::Global().LoadAll(paths);
}

}  // namespace mixrt::examples
