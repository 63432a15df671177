// The plugin's side of isolation, run by mixrt-plugin-host: loads one
// plugin and serves the host's calls on the shared channel until the host
// shuts it down or goes away. A crash or hang in the plugin ends this
// process, which the host notices (isolated_plugin.h); nothing here tries to
// survive the plugin.
#ifndef MIXRT_CORE_PLUGIN_ISOLATION_PLUGIN_HOST_SERVER_H_
#define MIXRT_CORE_PLUGIN_ISOLATION_PLUGIN_HOST_SERVER_H_

#include <cstdint>
#include <string>

namespace mixrt::isolation {

// Serves `plugin_path`; returns the process's exit code.
int ServePlugin(const std::string& plugin_path, uint64_t arena_bytes);

}  // namespace mixrt::isolation

#endif  // MIXRT_CORE_PLUGIN_ISOLATION_PLUGIN_HOST_SERVER_H_
