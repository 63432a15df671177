// mixrt plugin conformance suite: checks every op and dtype a plugin claims
// against the reference plugin.
//
//   conformance --plugin=/path/libmixrt_x.so [--reference=...] [gtest flags]
//   conformance --plugin=... --matrix=DIR   # and write the plugin matrix
//   conformance --plugin=... --isolate      # the plugin out of process
//
// An op the plugin declares unsupported (ABI 1.1's per-op query, or its
// class matrix) is never launched: its cases are skipped as "not
// implemented" and the table printed at the end counts them apart from
// failures. Fallback is off, so every op a case runs on the plugin is the
// plugin's own. A plugin with no device prints "skipped: no device" with the
// driver's reason and exits with status 77: not a pass.
//
// The reference plugin is found in Bazel's runfiles or beside this binary
// (an installed SDK's bin/), else name it with --reference.
#include <cstdio>
#include <cstdlib>
#include <set>
#include <string>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/status/status.h"
#include "common/atomic_write.h"
#include "common/cpu_info_field.h"
#include "core/bundled/bundled_plugins.h"
#include "core/plugin/plugin_search_path.h"
#include "core/plugin/registry.h"
#include "core/tensor/op_fallback.h"
#include "gtest/gtest.h"
#include "plugins/conformance/conformance_cases.h"
#include "plugins/conformance/conformance_table.h"

ABSL_FLAG(std::string, plugin, "", "The plugin .so under test (required).");
ABSL_FLAG(std::string, reference, "",
          "The reference plugin .so; default: the one built with this suite.");
ABSL_FLAG(bool, isolate, false,
          "Run the plugin under test out of process (in mixrt-plugin-host): "
          "a plugin that crashes or hangs fails the cases from there on with "
          "the reason, and the suite still prints its report.");
ABSL_FLAG(std::string, matrix, "",
          "Also time each case and write the plugin matrix (op x dtype x "
          "status x worst error x speed) as DIR/<plugin>.json and "
          "DIR/<plugin>.md.");

namespace mixrt::conformance {
namespace {

// automake's exit status for a skipped test.
constexpr int kExitSkipped = 77;

class ConformanceTest : public ::testing::Test {
 public:
  ConformanceTest(const Case* c, const Devices* devices)
      : case_(c), devices_(devices) {}

  void TestBody() override {
    const CapabilityEntry& cap =
        devices_->plugin.info().capability(case_->op_class, case_->dtype);
    if (cap.level == MIXRT_SUPPORT_UNSUPPORTED) {
      GTEST_SKIP() << kNotImplemented << "the plugin reports "
                   << OpClassName(case_->op_class) << "/"
                   << DTypeName(case_->dtype) << " unsupported: " << cap.reason;
    }
    case_->run(*devices_);
  }

 private:
  const Case* case_;
  const Devices* devices_;
};

// Whether /proc/cpuinfo's flags name `flag` (true where it cannot be read:
// then the run goes ahead).
bool CpuHasFlag(const std::string& flag) {
  const std::set<std::string> flags = CpuFlags();
  return flags.empty() || flags.count(flag) > 0;
}

int Main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  absl::ParseCommandLine(argc, argv);
  // A run under an ISA cap (ONEDNN_MAX_CPU_ISA=AVX2) on a CPU without what
  // the cap takes away repeats the uncapped run exactly: it passes at once,
  // saying so (on the AVX2 kind it cost 60 s of test time, more under
  // ASan, inside CI's hour).
  if (const char* flag = std::getenv("MIXRT_CONFORMANCE_SKIP_WITHOUT");
      flag != nullptr && !CpuHasFlag(flag)) {
    std::printf(
        "conformance: this CPU has no %s, so the ISA cap of this run changes "
        "nothing: the uncapped run covers it\n",
        flag);
    return 0;
  }
  const std::string plugin_path = absl::GetFlag(FLAGS_plugin);
  if (plugin_path.empty()) {
    std::fprintf(stderr,
                 "conformance: --plugin=/path/libmixrt_x.so is required\n");
    return 2;
  }
  std::string reference_path = absl::GetFlag(FLAGS_reference);
  if (reference_path.empty()) {
    reference_path = BundledPluginPath(argv[0], "reference");
    if (reference_path.empty()) {
      std::fprintf(stderr,
                   "conformance: no reference plugin in Bazel's runfiles or "
                   "beside this binary (%s); name it with "
                   "--reference=/path/libmixrt_reference.so\n",
                   CoreObjectDirectory().c_str());
      return 2;
    }
  }
  // Every op a case launches on the plugin must be the plugin's own.
  (void)SetFallbackPolicy("off");
  static Registry registry;
  auto reference = registry.Load(reference_path);
  if (!reference.ok()) {
    std::fprintf(stderr, "conformance: reference plugin: %s\n",
                 std::string(reference.status().message()).c_str());
    return 2;
  }
  // The plugin under test may be the reference itself (a self-check).
  LoadOptions options;
  if (absl::GetFlag(FLAGS_isolate)) options.isolation = "all";
  auto plugin = registry.Load(plugin_path, options);
  if (!plugin.ok()) {
    std::fprintf(stderr, "conformance: %s\n",
                 std::string(plugin.status().message()).c_str());
    return 1;
  }
  static Devices devices;
  devices.reference = Device(*reference, 0);
  if ((*plugin)->devices().empty()) {
    // Nothing can run: say so and exit with the "skipped" status, so no
    // caller mistakes a plugin that was never exercised for one that passed.
    std::printf("conformance: %s: skipped: no device (%s)\n",
                (*plugin)->name().c_str(),
                (*plugin)->no_device_reason().c_str());
    return kExitSkipped;
  }
  devices.plugin = Device(*plugin, 0);
  static const std::vector<Case> cases = AllCases();
  for (const Case& c : cases) {
    const std::string name = c.name;
    const size_t slash = name.find('/');
    ::testing::RegisterTest(name.substr(0, slash).c_str(),
                            name.substr(slash + 1).c_str(), nullptr, nullptr,
                            __FILE__, __LINE__, [&c]() -> ::testing::Test* {
                              return new ConformanceTest(&c, &devices);
                            });
  }
  std::printf("conformance: %zu cases for plugin '%s' against '%s'\n",
              cases.size(), (*plugin)->name().c_str(),
              (*reference)->name().c_str());
  auto* table = new ConformanceTable((*plugin)->name());
  ::testing::UnitTest::GetInstance()->listeners().Append(table);  // Owned.
  const std::string matrix_dir = absl::GetFlag(FLAGS_matrix);
  SetTimeOps(!matrix_dir.empty());
  const int failed = RUN_ALL_TESTS();
  if (!matrix_dir.empty()) {
    const std::string base = matrix_dir + "/" + (*plugin)->name();
    for (const auto& [path, text] :
         {std::pair<std::string, std::string>{
              base + ".json",
              table->MatrixJson((*reference)->name()).dump(1) + "\n"},
          {base + ".md", table->MatrixMarkdown((*reference)->name())}}) {
      if (absl::Status written = files::WriteFileAtomically(path, text);
          !written.ok()) {
        std::fprintf(stderr, "conformance: --matrix: %s\n",
                     std::string(written.message()).c_str());
        return 2;
      }
    }
    std::printf("conformance: plugin matrix written to %s.{json,md}\n",
                base.c_str());
  }
  return failed;
}

}  // namespace
}  // namespace mixrt::conformance

int main(int argc, char** argv) { return mixrt::conformance::Main(argc, argv); }
