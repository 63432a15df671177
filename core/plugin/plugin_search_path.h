// Where plugins are looked for, in order:
//   1. paths named explicitly (LoadOptions::explicit_paths, `--plugin=`);
//   2. MIXRT_PLUGIN_PATH: colon-separated files or directories;
//   3. the directory of the binary or library that holds the mixrt core.
// In directories, files named libmixrt_*.so are candidates. Empty entries of
// MIXRT_PLUGIN_PATH are ignored: unlike PATH, an empty entry never means the
// current directory, so a plugin dropped there is never picked up unnamed.
#ifndef MIXRT_CORE_PLUGIN_PLUGIN_SEARCH_PATH_H_
#define MIXRT_CORE_PLUGIN_PLUGIN_SEARCH_PATH_H_

#include <string>
#include <vector>

#include "absl/strings/string_view.h"

namespace mixrt {

inline constexpr char kPluginPathEnv[] = "MIXRT_PLUGIN_PATH";

// Expands one entry: a file is itself; a directory yields its libmixrt_*.so
// files, sorted by name; anything else yields nothing.
std::vector<std::string> ExpandPluginLocation(const std::string& location);

// Splits a MIXRT_PLUGIN_PATH value, dropping empty entries.
std::vector<std::string> SplitPluginPath(absl::string_view value);

// Directory of the loaded object (executable or shared library) that contains
// the mixrt core, or "" if it cannot be found.
std::string CoreObjectDirectory();

}  // namespace mixrt

#endif  // MIXRT_CORE_PLUGIN_PLUGIN_SEARCH_PATH_H_
