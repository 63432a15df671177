#include "core/plugin/registry.h"

#include <sys/stat.h>

#include <cstdlib>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "core/plugin/plugin_search_path.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/test_plugins.h"

namespace mixrt {
namespace {

using ::testing::HasSubstr;

TEST(Registry, LoadingTwiceIsIdempotent) {
  Registry registry;
  auto first = registry.Load(testing::ReferencePluginPath());
  auto second = registry.Load(testing::ReferencePluginPath());
  ASSERT_TRUE(first.ok()) << first.status();
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_EQ(*first, *second);
  EXPECT_EQ(registry.Reports().size(), 1u);
}

TEST(Registry, RefusesASecondBackendWithTheSameName) {
  Registry registry;
  ASSERT_TRUE(registry.Load(testing::FixturePath("ok")).ok());
  auto duplicate = registry.Load(testing::FixturePath("duplicate_name"));
  ASSERT_FALSE(duplicate.ok());
  EXPECT_THAT(duplicate.status().message(),
              HasSubstr("a backend named 'fixture_ok' is already loaded"));
}

TEST(Registry, SkipsBrokenPluginsAndKeepsTheirReasons) {
  Registry registry;
  registry.LoadAll(
      {testing::FixturePath("wrong_major"), testing::FixturePath("init_fails"),
       testing::FixturePath("no_device"), testing::ReferencePluginPath()});
  const std::vector<PluginReport> reports = registry.Reports();
  int usable = 0;
  for (const PluginReport& r : reports) {
    if (r.usable) {
      ++usable;
      EXPECT_EQ(r.name, "reference");
    } else {
      EXPECT_FALSE(r.reason.empty()) << r.path;
    }
  }
  EXPECT_EQ(usable, 1);
  auto device = registry.SelectDevice();
  ASSERT_TRUE(device.ok()) << device.status();
  EXPECT_EQ(device->ToString(), "reference:0");
}

TEST(Registry, SelectsByNameAndExplainsAMissingName) {
  Registry registry;
  registry.LoadAll({testing::ReferencePluginPath(), testing::FixturePath("ok"),
                    testing::FixturePath("no_device")});
  auto by_name = registry.SelectDevice("fixture_ok");
  ASSERT_TRUE(by_name.ok()) << by_name.status();
  EXPECT_EQ(by_name->backend()->name(), "fixture_ok");

  auto missing = registry.SelectDevice("tpu");
  ASSERT_FALSE(missing.ok());
  EXPECT_THAT(missing.status().message(),
              HasSubstr("no backend named 'tpu' is loaded"));

  auto deviceless = registry.SelectDevice("fixture_no_device");
  ASSERT_FALSE(deviceless.ok());
  EXPECT_THAT(deviceless.status().message(),
              HasSubstr("driver version is insufficient"));
}

TEST(Registry, SelectsFromTheEnvironmentVariable) {
  Registry registry;
  registry.LoadAll(
      {testing::ReferencePluginPath(), testing::FixturePath("ok")});
  ASSERT_EQ(setenv(kBackendEnv, "fixture_ok", 1), 0);
  auto device = registry.SelectDevice();
  unsetenv(kBackendEnv);
  ASSERT_TRUE(device.ok()) << device.status();
  EXPECT_EQ(device->backend()->name(), "fixture_ok");
}

TEST(Registry, SearchesMixrtPluginPathDirectories) {
  const std::string path = testing::FixturePath("ok");
  const std::string dir = path.substr(0, path.rfind('/'));
  Registry registry;
  // A leading and a doubled colon must not add the current directory.
  ASSERT_EQ(setenv(kPluginPathEnv, (":" + dir + "::").c_str(), 1), 0);
  registry.LoadAll();
  unsetenv(kPluginPathEnv);
  bool saw_ok = false;
  bool saw_garbage = false;
  for (const PluginReport& r : registry.Reports()) {
    saw_ok |= r.name == "fixture_ok" && r.usable;
    if (r.path.find("libmixrt_garbage.so") != std::string::npos) {
      saw_garbage = true;
      EXPECT_FALSE(r.usable);
    }
  }
  EXPECT_TRUE(saw_ok);
  EXPECT_TRUE(saw_garbage);
}

TEST(Registry, WorldWritableDirectoriesAreNotSearched) {
  // Anyone could have dropped code there: searched, it is skipped with a
  // reason; named explicitly, it loads.
  const std::string dir = std::string(getenv("TEST_TMPDIR")) + "/open_dir";
  ASSERT_EQ(mkdir(dir.c_str(), 0777), 0);
  ASSERT_EQ(chmod(dir.c_str(), 0777), 0);
  const std::string copy = dir + "/libmixrt_fixture_ok.so";
  std::ifstream src(testing::FixturePath("ok"), std::ios::binary);
  std::ofstream(copy, std::ios::binary) << src.rdbuf();
  ASSERT_EQ(chmod(copy.c_str(), 0755), 0);
  Registry searched;
  ASSERT_EQ(setenv(kPluginPathEnv, dir.c_str(), 1), 0);
  searched.LoadAll();
  unsetenv(kPluginPathEnv);
  bool refused = false;
  for (const PluginReport& r : searched.Reports()) {
    refused |= r.state == PluginState::kUntrusted &&
               r.reason.find("is writable by its group or by every user") !=
                   std::string::npos;
  }
  EXPECT_TRUE(refused);
  EXPECT_FALSE(searched.FindBackend("fixture_ok").ok());
  Registry named;
  named.LoadAll({copy});
  EXPECT_TRUE(named.FindBackend("fixture_ok").ok());
}

TEST(Registry, BestScoreWinsWhenNothingIsNamed) {
  Registry registry;
  registry.LoadAll(
      {testing::FixturePath("ok"), testing::ReferencePluginPath()});
  // Both score 1: the first loaded stays first (stable order).
  auto device = registry.SelectDevice();
  ASSERT_TRUE(device.ok());
  EXPECT_EQ(device->backend()->name(), "fixture_ok");
}

TEST(Registry, ConcurrentLoadsAndQueriesAgree) {
  Registry registry;
  std::vector<std::thread> threads;
  std::vector<const Backend*> seen(8, nullptr);
  for (int i = 0; i < 8; ++i) {
    threads.emplace_back([&, i] {
      auto backend = registry.Load(testing::ReferencePluginPath());
      if (backend.ok()) seen[i] = *backend;
      for (int k = 0; k < 50; ++k) {
        registry.Reports();
        registry.UsableBackends();
        registry.SelectDevice().IgnoreError();
      }
    });
  }
  for (std::thread& t : threads) t.join();
  for (const Backend* b : seen) EXPECT_EQ(b, seen[0]);
  EXPECT_NE(seen[0], nullptr);
  EXPECT_EQ(registry.Reports().size(), 1u);
}

}  // namespace
}  // namespace mixrt
