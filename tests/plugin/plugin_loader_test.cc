// The loader refuses every broken plugin with a message naming what was
// wrong, and never crashes the host.
#include "core/plugin/plugin_loader.h"

#include <fcntl.h>
#include <sys/stat.h>

#include <fstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/test_plugins.h"

namespace mixrt {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

TEST(PluginLoader, LoadsTheReferencePlugin) {
  auto backend = LoadPlugin(
      testing::RunfilePath("plugins/reference/libmixrt_reference.so"));
  ASSERT_TRUE(backend.ok()) << backend.status();
  const BackendIdentity& id = (*backend)->identity();
  EXPECT_EQ(id.name, "reference");
  EXPECT_EQ(id.device_type, "cpu");
  EXPECT_EQ(id.abi_major, MIXRT_PLUGIN_API_MAJOR);
  EXPECT_EQ(id.score, 1);
  ASSERT_EQ((*backend)->devices().size(), 1u);
  const DeviceInfo& device = (*backend)->devices()[0];
  EXPECT_TRUE(device.flags & MIXRT_DEVICE_FLAG_HOST_MEMORY);
  EXPECT_EQ(device.capability(MIXRT_OP_CLASS_ELEMENTWISE, DType::kF32).level,
            MIXRT_SUPPORT_NATIVE);
  EXPECT_EQ(device.capability(MIXRT_OP_CLASS_MATMUL, DType::kBF16).level,
            MIXRT_SUPPORT_SLOW);
  EXPECT_EQ(device.capability(MIXRT_OP_CLASS_CONV, DType::kI32).level,
            MIXRT_SUPPORT_UNSUPPORTED);
  EXPECT_FALSE(
      device.capability(MIXRT_OP_CLASS_CONV, DType::kI32).reason.empty());
}

// Two builds of one plugin (same name, version and build info; another
// file) key the compile cache apart, so the fusion timings and plans one
// build decided are not read for the other; one file loaded twice keys
// alike.
TEST(PluginLoader, ARebuiltPluginKeysTheCompileCacheApart) {
  const std::string original =
      testing::RunfilePath("plugins/reference/libmixrt_reference.so");
  const std::string rebuilt =
      ::testing::TempDir() + "/libmixrt_reference_rebuilt.so";
  {
    std::ifstream in(original, std::ios::binary);
    std::ofstream out(rebuilt, std::ios::binary | std::ios::trunc);
    out << in.rdbuf();
  }
  const struct timespec times[2] = {{1000000000, 0}, {1000000000, 0}};
  ASSERT_EQ(utimensat(AT_FDCWD, rebuilt.c_str(), times, 0), 0);
  auto first = LoadPlugin(original);
  auto again = LoadPlugin(original);
  auto other = LoadPlugin(rebuilt);
  ASSERT_TRUE(first.ok() && again.ok() && other.ok());
  EXPECT_EQ((*other)->identity().name, (*first)->identity().name);
  EXPECT_EQ((*other)->identity().build_info, (*first)->identity().build_info);
  EXPECT_THAT((*other)->identity().file_stamp,
              HasSubstr("modified 1000000000.0"));
  EXPECT_EQ(BackendCacheKey((*again)->identity()),
            BackendCacheKey((*first)->identity()));
  EXPECT_NE(BackendCacheKey((*other)->identity()),
            BackendCacheKey((*first)->identity()));
}

TEST(PluginLoader, LoadsAHealthyRawAbiPlugin) {
  auto backend = LoadPlugin(testing::FixturePath("ok"));
  ASSERT_TRUE(backend.ok()) << backend.status();
  EXPECT_EQ((*backend)->name(), "fixture_ok");
  EXPECT_EQ((*backend)->identity().score, 1);  // No score symbol: default 1.
}

TEST(PluginLoader, RefusesAnotherMajorVersionNamingBoth) {
  auto backend = LoadPlugin(testing::FixturePath("wrong_major"));
  ASSERT_FALSE(backend.ok());
  EXPECT_THAT(
      backend.status().message(),
      AllOf(HasSubstr("libmixrt_fixture_wrong_major.so"), HasSubstr("ABI 2.0"),
            HasSubstr(absl::StrCat("this host implements ABI ",
                                   MIXRT_PLUGIN_API_MAJOR, ".",
                                   MIXRT_PLUGIN_API_MINOR)),
            HasSubstr("major versions must match")));
}

TEST(PluginLoader, RefusesAPluginWithoutTheEntrySymbol) {
  auto backend = LoadPlugin(testing::FixturePath("no_entry"));
  ASSERT_FALSE(backend.ok());
  EXPECT_THAT(backend.status().message(),
              AllOf(HasSubstr("does not export the entry symbol"),
                    HasSubstr("mixrt_plugin_entry")));
}

TEST(PluginLoader, RefusesAPluginWhoseInitFails) {
  auto backend = LoadPlugin(testing::FixturePath("init_fails"));
  ASSERT_FALSE(backend.ok());
  EXPECT_THAT(backend.status().message(),
              AllOf(HasSubstr("failed to initialize"),
                    HasSubstr("fixture driver 9.9 not found")));
}

TEST(PluginLoader, RefusesAFileThatIsNotASharedObject) {
  auto backend =
      LoadPlugin(testing::RunfilePath("tests/fixtures/libmixrt_garbage.so"));
  ASSERT_FALSE(backend.ok());
  EXPECT_THAT(
      backend.status().message(),
      AllOf(HasSubstr("refused before loading"), HasSubstr("not an ELF file")));
}

TEST(PluginLoader, ReportsAMissingFile) {
  auto backend = LoadPlugin("/nonexistent/libmixrt_nothing.so");
  ASSERT_FALSE(backend.ok());
  EXPECT_TRUE(absl::IsNotFound(backend.status()));
  EXPECT_THAT(backend.status().message(), HasSubstr("/nonexistent/"));
}

TEST(PluginLoader, KeepsTheDriverReasonWhenThereIsNoDevice) {
  auto backend = LoadPlugin(testing::FixturePath("no_device"));
  ASSERT_TRUE(backend.ok()) << backend.status();
  EXPECT_TRUE((*backend)->devices().empty());
  EXPECT_THAT((*backend)->no_device_reason(),
              HasSubstr("CUDA driver version is insufficient"));
}

TEST(PluginLoader, RefusesACapabilityLevelThatDoesNotExist) {
  auto backend = LoadPlugin(testing::FixturePath("bad_capability"));
  ASSERT_FALSE(backend.ok());
  EXPECT_THAT(backend.status().message(),
              AllOf(HasSubstr("capability level 7"),
                    HasSubstr("expected 0 (unsupported), 1 (slow) or 2")));
}

TEST(PluginLoader, RefusesATableSmallerThanAbi10) {
  auto backend = LoadPlugin(testing::FixturePath("short_table"));
  ASSERT_FALSE(backend.ok());
  EXPECT_THAT(backend.status().message(),
              AllOf(HasSubstr("struct_size"), HasSubstr("ABI 1.0 requires")));
}

TEST(PluginLoader, RefusesATableMissingARequiredFunction) {
  auto backend = LoadPlugin(testing::FixturePath("missing_fn"));
  ASSERT_FALSE(backend.ok());
  EXPECT_THAT(backend.status().message(),
              HasSubstr("required function kernel_launch is NULL"));
}

}  // namespace
}  // namespace mixrt
