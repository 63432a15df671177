// The mixrt command line.
//
//   mixrt info [--json] [--isolate] [--plugin=/path/libmixrt_x.so,...]
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
ABSL_FLAG(bool, isolate, false,
          "Probe each plugin in a child process first: a plugin that crashes "
          "or hangs while loading is reported instead of taking mixrt down.");
ABSL_FLAG(int, probe_timeout_s, 10,
          "With --isolate: seconds a probe may take (1 to 3600).");

namespace {

constexpr int kMaxProbeTimeoutS = 3600;

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
  const int timeout_s = absl::GetFlag(FLAGS_probe_timeout_s);
  if (timeout_s < 1 || timeout_s > kMaxProbeTimeoutS) {
    std::fprintf(stderr,
                 "mixrt info: --probe_timeout_s=%d; expected 1 to %d seconds "
                 "(a probe that may take no time would refuse every plugin)\n",
                 timeout_s, kMaxProbeTimeoutS);
    return 2;
  }
  mixrt::Registry& registry = mixrt::Registry::Global();
  mixrt::LoadOptions options;
  options.isolate = absl::GetFlag(FLAGS_isolate);
  options.timeout = absl::Seconds(timeout_s);
  registry.LoadAll(paths, options);
  if (absl::GetFlag(FLAGS_json)) {
    // Paths and plugin-supplied strings need not be UTF-8; JSON must be.
    std::printf("%s\n",
                mixrt::tools::InfoJson(registry)
                    .dump(2, ' ', false,
                          nlohmann::json::error_handler_t::replace)
                    .c_str());
  } else {
    std::printf("%s", mixrt::tools::InfoText(registry).c_str());
  }
  // Scripts test for a usable machine with `mixrt info`: no backend is a
  // failure (the report above says why).
  return registry.UsableBackends().empty() ? 1 : 0;
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
