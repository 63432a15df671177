// Plugins built in this workspace, found through Bazel runfiles: what
// `bazel run //tools:mixrt` and the tests load without any installation.
#ifndef MIXRT_CORE_BUNDLED_BUNDLED_PLUGINS_H_
#define MIXRT_CORE_BUNDLED_BUNDLED_PLUGINS_H_

#include <string>
#include <vector>

namespace mixrt {

// Paths of the bundled plugin files that exist, given argv[0].
std::vector<std::string> BundledPluginPaths(const char* argv0);

// The path of one bundled plugin, e.g. BundledPluginPath(argv0, "reference"):
// from the runfiles, else libmixrt_<backend>.so beside the binary (an
// installed SDK's bin/); "" if it is in neither.
std::string BundledPluginPath(const char* argv0, const std::string& backend);

}  // namespace mixrt

#endif  // MIXRT_CORE_BUNDLED_BUNDLED_PLUGINS_H_
