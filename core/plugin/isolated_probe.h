// Probing a plugin in a child process: a plugin that crashes or hangs while
// loading (in dlopen, its entry point or its init) takes down only the
// child, and the host gets a Status saying what happened. Used by
// `mixrt info --isolate` and LoadOptions::isolate.
#ifndef MIXRT_CORE_PLUGIN_ISOLATED_PROBE_H_
#define MIXRT_CORE_PLUGIN_ISOLATED_PROBE_H_

#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"

namespace mixrt {

// OK when a child process loaded and initialized the plugin; otherwise the
// load error, or "crashed with signal N", or "did not finish within T".
absl::Status ProbePluginInChild(const std::string& path,
                                absl::Duration timeout);

}  // namespace mixrt

#endif  // MIXRT_CORE_PLUGIN_ISOLATED_PROBE_H_
