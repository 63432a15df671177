#include "tools/info/info_report.h"

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/test_plugins.h"

namespace mixrt::tools {
namespace {

using ::testing::HasSubstr;

TEST(InfoReport, ListsLoadedAndSkippedPluginsWithReasons) {
  Registry registry;
  registry.LoadAll(
      {testing::RunfilePath("plugins/reference/libmixrt_reference.so"),
       testing::RunfilePath("tests/fixtures/libmixrt_fixture_no_device.so"),
       testing::RunfilePath("tests/fixtures/libmixrt_fixture_wrong_major.so")});
  const nlohmann::json json = InfoJson(registry);
  EXPECT_EQ(json["host_abi"],
            absl::StrCat(MIXRT_PLUGIN_API_MAJOR, ".", MIXRT_PLUGIN_API_MINOR));
  EXPECT_EQ(json["selected"], "reference:0");
  ASSERT_EQ(json["plugins"].size(), 3u);
  const nlohmann::json& ref = json["plugins"][0];
  EXPECT_EQ(ref["name"], "reference");
  EXPECT_TRUE(ref["usable"].get<bool>());
  EXPECT_EQ(ref["devices"][0]["capabilities"]["elementwise"]["f32"]["level"],
            "native");
  EXPECT_EQ(ref["devices"][0]["capabilities"]["conv"]["i64"]["level"],
            "unsupported");
  EXPECT_EQ(ref["devices"][0]["capabilities"]["cast"]["f16"]["level"], "slow");
  const nlohmann::json& no_device = json["plugins"][1];
  EXPECT_FALSE(no_device["usable"].get<bool>());
  EXPECT_THAT(no_device["reason"].get<std::string>(),
              HasSubstr("no device: cudaGetDeviceCount"));
  const nlohmann::json& wrong = json["plugins"][2];
  EXPECT_EQ(wrong["name"], "");
  EXPECT_THAT(wrong["reason"].get<std::string>(), HasSubstr("ABI 2.0"));

  const std::string text = InfoText(registry);
  EXPECT_THAT(text, HasSubstr("reference [usable]"));
  EXPECT_THAT(text, HasSubstr("fixture_no_device [no device]"));
  EXPECT_THAT(text, HasSubstr("(unnamed) [failed]"));
  EXPECT_THAT(text, HasSubstr("selected: reference:0"));
}

}  // namespace
}  // namespace mixrt::tools
