#include "tests/testing/test_plugins.h"

#include <sys/stat.h>

#include <memory>

#include "absl/status/statusor.h"
#include "core/plugin/registry.h"
#include "gtest/gtest.h"
#include "tools/cpp/runfiles/runfiles.h"

namespace mixrt::testing {

std::string RunfilePath(const std::string& workspace_relative) {
  using bazel::tools::cpp::runfiles::Runfiles;
  std::string error;
  std::unique_ptr<Runfiles> runfiles(Runfiles::CreateForTest(&error));
  if (runfiles == nullptr) {
    ADD_FAILURE() << "runfiles unavailable: " << error;
    return "";
  }
  const std::string path = runfiles->Rlocation("mixrt/" + workspace_relative);
  struct stat st;
  if (stat(path.c_str(), &st) != 0) {
    ADD_FAILURE() << "missing runfile " << workspace_relative << " at " << path;
  }
  return path;
}

std::string FixturePath(const std::string& variant) {
  return RunfilePath("tests/fixtures/libmixrt_fixture_" + variant + ".so");
}

std::string ReferencePluginPath() {
  return RunfilePath("plugins/reference/libmixrt_reference.so");
}

Device ReferenceDevice() {
  absl::StatusOr<const Backend*> backend =
      Registry::Global().Load(ReferencePluginPath());
  if (!backend.ok()) {
    ADD_FAILURE() << backend.status();
    return Device();
  }
  return Device(*backend, 0);
}

Device CpuDevice() {
  absl::StatusOr<const Backend*> backend =
      Registry::Global().Load(RunfilePath("backends/cpu/libmixrt_cpu.so"));
  if (!backend.ok()) {
    ADD_FAILURE() << backend.status();
    return Device();
  }
  return Device(*backend, 0);
}

bool CpuRunsNatively(MixrtOpClass op_class, DType dtype) {
  const Device cpu = CpuDevice();
  return cpu.valid() &&
         cpu.info().capability(op_class, dtype).level == MIXRT_SUPPORT_NATIVE;
}

}  // namespace mixrt::testing
