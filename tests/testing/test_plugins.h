// Locating the plugins and fixtures built in this workspace from a test.
#ifndef MIXRT_TESTS_TESTING_TEST_PLUGINS_H_
#define MIXRT_TESTS_TESTING_TEST_PLUGINS_H_

#include <string>

#include "core/dtype.h"
#include "core/plugin/device.h"
#include "mixrt/plugin_api.h"

namespace mixrt::testing {

// Runfiles path of a file in this workspace, e.g.
// RunfilePath("tests/fixtures/libmixrt_fixture_ok.so"); fails the test if
// missing.
std::string RunfilePath(const std::string& workspace_relative);

// tests/fixtures/libmixrt_fixture_<variant>.so (fixture_plugin.cc).
std::string FixturePath(const std::string& variant);

// The reference plugin's file.
std::string ReferencePluginPath();

// The reference plugin's device, loaded into Registry::Global().
Device ReferenceDevice();

// The CPU plugin's device, loaded into Registry::Global() (the test needs
// //backends/cpu:libmixrt_cpu.so as data).
Device CpuDevice();

// Whether the CPU plugin (CpuDevice) reports `op_class` in `dtype` native
// on this machine. Its fusions and packed weights follow it: bf16 matmul
// is emulated (and left op by op) on CPUs without avx512_bf16 or AMX, or
// with ONEDNN_MAX_CPU_ISA below them, so tests state what each CPU does.
bool CpuRunsNatively(MixrtOpClass op_class, DType dtype);

}  // namespace mixrt::testing

#endif  // MIXRT_TESTS_TESTING_TEST_PLUGINS_H_
