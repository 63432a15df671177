// The mixrt command line.
//
//   mixrt info [--json] [--isolate] [--plugin=/path/libmixrt_x.so,...]
//
// Plugins are searched as core/plugin/plugin_search_path.h says, plus those
// built in this workspace when run through Bazel.
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "common/out_of_memory.h"
#include "core/bundled/bundled_plugins.h"
#include "core/plugin/plugin_search_path.h"
#include "core/plugin/registry.h"
#include "tools/cpp/runfiles/runfiles.h"
#include "tools/info/info_report.h"

ABSL_FLAG(bool, json, false, "Print machine-readable JSON.");
ABSL_FLAG(std::vector<std::string>, plugin, {},
          "Plugin files or directories to load first (comma-separated).");
ABSL_FLAG(bool, isolate, false,
          "Probe each plugin in a child process first: a plugin that crashes "
          "or hangs while loading is reported instead of taking mixrt down.");
ABSL_FLAG(std::string, plugin_isolation, "",
          "Plugins to run out of process, in mixrt-plugin-host: 'all' or "
          "names (cpu,faulty); default $MIXRT_PLUGIN_ISOLATION. A crash or "
          "hang then fails that backend, not mixrt.");
ABSL_FLAG(int, probe_timeout_s, 10,
          "With --isolate: seconds a probe may take (1 to 3600).");

namespace {

constexpr int kMaxProbeTimeoutS = 3600;

constexpr char kUsage[] =
    "mixrt <command> [flags]\n"
    "commands:\n"
    "  info   list plugins (loaded or skipped, and why), devices and the\n"
    "         precision capability matrix\n"
    "  bench  benchmark backends x precisions x modes (mixrt bench --help)";

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
  if (!absl::GetFlag(FLAGS_plugin_isolation).empty()) {
    options.isolation = absl::GetFlag(FLAGS_plugin_isolation);
  }
  registry.LoadAll(paths, options);
  if (absl::GetFlag(FLAGS_json)) {
    // Paths and plugin-supplied strings need not be UTF-8; JSON must be.
    std::printf("%s\n", mixrt::tools::InfoJson(registry)
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

// `mixrt bench ...` is its own binary (tools/bench), found in Bazel's
// runfiles or beside this one; its flags are its own.
int ExecBench(int argc, char** argv) {
  std::string path;
  std::string error;
  std::unique_ptr<bazel::tools::cpp::runfiles::Runfiles> runfiles(
      bazel::tools::cpp::runfiles::Runfiles::Create(argv[0], &error));
  if (runfiles != nullptr) {
    path = runfiles->Rlocation("mixrt/tools/bench/mixrt_bench");
  }
  if (path.empty() || access(path.c_str(), X_OK) != 0) {
    path = mixrt::CoreObjectDirectory() + "/mixrt_bench";
  }
  if (access(path.c_str(), X_OK) != 0) {
    std::fprintf(stderr,
                 "mixrt bench: the benchmark binary mixrt_bench is neither in "
                 "this binary's runfiles nor beside it (%s)\n",
                 path.c_str());
    return 2;
  }
  std::vector<char*> args = {const_cast<char*>(path.c_str())};
  for (int i = 1; i < argc; ++i) args.push_back(argv[i]);
  args.push_back(nullptr);
  if (runfiles != nullptr) {
    for (const auto& [key, value] : runfiles->EnvVars()) {
      setenv(key.c_str(), value.c_str(), 0);
    }
  }
  execv(path.c_str(), args.data());
  std::fprintf(stderr, "mixrt bench: cannot run %s: %s\n", path.c_str(),
               std::strerror(errno));
  return 2;
}

// Whether `arg` asks for help (what absl's flags parser would answer with
// its own text and exit status 1, as if help were an error).
bool AsksForHelp(const std::string& arg) {
  return arg == "--help" || arg == "-h" || arg == "-help" || arg == "help" ||
         arg == "--helpfull";
}

int main(int argc, char** argv) {
  mixrt::ReportOutOfMemoryAtExit("mixrt");
  if (argc >= 2 && std::string(argv[1]) == "bench")
    return ExecBench(argc, argv);
  for (int i = 1; i < argc; ++i) {
    if (AsksForHelp(argv[i])) {
      // Help is an answer, on stdout, with status 0.
      std::printf(
          "%s\n\nflags of info:\n"
          "  --json              print machine-readable JSON\n"
          "  --plugin=P[,P...]   plugin files or directories to load first\n"
          "  --isolate           probe each plugin in a child process first\n"
          "  --plugin_isolation=all|NAMES  run plugins out of process\n"
          "  --probe_timeout_s=N with --isolate: seconds a probe may take "
          "(1 to 3600, default 10)\n",
          kUsage);
      return 0;
    }
  }
  absl::SetProgramUsageMessage(kUsage);
  std::vector<char*> args = absl::ParseCommandLine(argc, argv);
  if (args.size() < 2) {
    std::fprintf(stderr, "%s\n", kUsage);
    return 2;
  }
  const std::string command = args[1];
  if (args.size() > 2) {
    // An argument nothing reads is a mistake to report, not to ignore.
    std::fprintf(
        stderr,
        "mixrt %s: unexpected argument '%s' (flags start with --)\n%s\n",
        command.c_str(), args[2], kUsage);
    return 2;
  }
  if (command == "info") return RunInfo(argv[0]);
  std::fprintf(stderr, "mixrt: unknown command '%s'\n%s\n", command.c_str(),
               kUsage);
  return 2;
}
