// The mixrt command line.
//
//   mixrt info [--json] [--plugin=/path/libmixrt_x.so,...]
//
// Plugins are searched as core/plugin/plugin_search_path.h says, plus those
// built in this workspace when run through Bazel.
#include <cstdio>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "core/bundled/bundled_plugins.h"
#include "core/plugin/registry.h"
#include "tools/info/info_report.h"

ABSL_FLAG(bool, json, false, "Print machine-readable JSON.");
ABSL_FLAG(std::vector<std::string>, plugin, {},
          "Plugin files or directories to load first (comma-separated).");

namespace {

constexpr char kUsage[] =
    "mixrt <command> [flags]\n"
    "commands:\n"
    "  info   list plugins (loaded or skipped, and why), devices and the\n"
    "         precision capability matrix";

int RunInfo(const char* argv0) {
  std::vector<std::string> paths = absl::GetFlag(FLAGS_plugin);
  for (const std::string& path : mixrt::BundledPluginPaths(argv0)) {
    paths.push_back(path);
  }
  mixrt::Registry& registry = mixrt::Registry::Global();
  registry.LoadAll(paths);
  if (absl::GetFlag(FLAGS_json)) {
    std::printf("%s\n", mixrt::tools::InfoJson(registry).dump(2).c_str());
  } else {
    std::printf("%s", mixrt::tools::InfoText(registry).c_str());
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(kUsage);
  std::vector<char*> args = absl::ParseCommandLine(argc, argv);
  if (args.size() < 2) {
    std::fprintf(stderr, "%s\n", kUsage);
    return 2;
  }
  const std::string command = args[1];
  if (command == "info") return RunInfo(argv[0]);
  std::fprintf(stderr, "mixrt: unknown command '%s'\n%s\n", command.c_str(),
               kUsage);
  return 2;
}
