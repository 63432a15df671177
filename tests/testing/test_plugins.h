// Locating the plugins and fixtures built in this workspace from a test.
#ifndef MIXRT_TESTS_TESTING_TEST_PLUGINS_H_
#define MIXRT_TESTS_TESTING_TEST_PLUGINS_H_

#include <string>

#include "core/plugin/device.h"

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

}  // namespace mixrt::testing

#endif  // MIXRT_TESTS_TESTING_TEST_PLUGINS_H_
