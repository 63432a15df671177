#include "core/bundled/bundled_plugins.h"

#include <sys/stat.h>

#include <memory>

#include "core/plugin/isolated_plugin.h"
#include "core/plugin/plugin_search_path.h"
#include "tools/cpp/runfiles/runfiles.h"

namespace mixrt {
namespace {

using bazel::tools::cpp::runfiles::Runfiles;

// Workspace-relative locations of the plugins this build produces, best
// first (the registry still orders by score).
constexpr const char* kBundled[][2] = {
    {"cuda", "mixrt/backends/cuda/libmixrt_cuda.so"},
    {"rocm", "mixrt/backends/rocm/libmixrt_rocm.so"},
    {"cpu", "mixrt/backends/cpu/libmixrt_cpu.so"},
    {"reference", "mixrt/plugins/reference/libmixrt_reference.so"},
};

bool IsFile(const std::string& path) {
  struct stat st;
  return !path.empty() && stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

std::unique_ptr<Runfiles> OpenRunfiles(const char* argv0) {
  std::string error;
  std::unique_ptr<Runfiles> runfiles(
      Runfiles::Create(argv0 != nullptr ? argv0 : "", &error));
  if (runfiles == nullptr) runfiles.reset(Runfiles::CreateForTest(&error));
  return runfiles;
}

}  // namespace

std::string BundledPluginPath(const char* argv0, const std::string& backend) {
  if (std::unique_ptr<Runfiles> runfiles = OpenRunfiles(argv0)) {
    for (const auto& entry : kBundled) {
      if (backend != entry[0]) continue;
      const std::string path = runfiles->Rlocation(entry[1]);
      if (IsFile(path)) return path;
    }
  }
  // Installed (plugins/install.sh): the plugins sit beside the binaries.
  const std::string dir = CoreObjectDirectory();
  const std::string beside =
      dir.empty() ? "" : dir + "/libmixrt_" + backend + ".so";
  return IsFile(beside) ? beside : "";
}

std::vector<std::string> BundledPluginPaths(const char* argv0) {
  std::vector<std::string> paths;
  std::unique_ptr<Runfiles> runfiles = OpenRunfiles(argv0);
  if (runfiles == nullptr) return paths;
  for (const auto& entry : kBundled) {
    const std::string path = runfiles->Rlocation(entry[1]);
    if (IsFile(path)) paths.push_back(path);
  }
  // What out-of-process plugins run in (MIXRT_PLUGIN_ISOLATION).
  const std::string host =
      runfiles->Rlocation("mixrt/tools/plugin_host/mixrt-plugin-host");
  if (IsFile(host)) SetDefaultPluginHost(host);
  return paths;
}

}  // namespace mixrt
