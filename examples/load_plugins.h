// Every example loads its backends the same way: the files named with
// --plugin=PATH (repeatable, or comma-separated; loaded as given, wherever
// they are), then the bundled ones (Bazel's runfiles), MIXRT_PLUGIN_PATH
// and the plugins beside the program or library holding the mixrt core.
#ifndef MIXRT_EXAMPLES_LOAD_PLUGINS_H_
#define MIXRT_EXAMPLES_LOAD_PLUGINS_H_

namespace mixrt::examples {

// Loads them into Registry::Global(); what was skipped and why is in its
// Reports() (an untrusted plugin is also said on stderr).
void LoadPlugins(const char* argv0);

}  // namespace mixrt::examples

#endif  // MIXRT_EXAMPLES_LOAD_PLUGINS_H_
