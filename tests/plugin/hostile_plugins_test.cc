// Misbehaving plugins never take the host down: crashes and hangs are
// caught by isolated probing, bad data is refused by validation, a leaky or
// oversized-table plugin still works.
#include "absl/status/status.h"
#include "core/allocator/caching_allocator.h"
#include "core/plugin/isolated_probe.h"
#include "core/plugin/registry.h"
#include "core/tensor/factories.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/test_plugins.h"

// The leaky fixture never frees what it allocates, on purpose: what is
// tested is that the host survives it. Its allocations are that plugin's, not
// the host's, so LeakSanitizer is told to ignore them in this binary only.
extern "C" const char* __lsan_default_suppressions() {
  return "leak:libmixrt_hostile_leaky.so\n";
}

namespace mixrt {
namespace {

using ::testing::HasSubstr;

std::string Hostile(const std::string& variant) {
  return testing::RunfilePath("tests/fixtures/hostile/libmixrt_hostile_" +
                              variant + ".so");
}

TEST(HostilePlugins, ACrashInInitIsReportedNotFatal) {
  absl::Status s =
      ProbePluginInChild(Hostile("crash_in_init"), absl::Seconds(10));
  EXPECT_TRUE(absl::IsAborted(s)) << s;
  EXPECT_THAT(s.message(), HasSubstr("crashed with signal 11"));
}

TEST(HostilePlugins, AHangIsKilledAfterTheTimeout) {
  absl::Status s =
      ProbePluginInChild(Hostile("hang_in_init"), absl::Milliseconds(300));
  EXPECT_TRUE(absl::IsDeadlineExceeded(s)) << s;
  EXPECT_THAT(s.message(), HasSubstr("did not finish loading within 300ms"));
}

TEST(HostilePlugins, IsolatedLoadingRecordsReasonsAndGoesOn) {
  Registry registry;
  LoadOptions options;
  options.isolate = true;
  options.timeout = absl::Milliseconds(500);
  registry.LoadAll(
      {Hostile("crash_in_init"), Hostile("hang_in_init"),
       testing::RunfilePath("plugins/reference/libmixrt_reference.so")},
      options);
  int crashed = 0, hung = 0;
  for (const PluginReport& r : registry.Reports()) {
    crashed += r.reason.find("crashed with signal") != std::string::npos;
    hung += r.reason.find("did not finish loading") != std::string::npos;
  }
  EXPECT_EQ(crashed, 1);
  EXPECT_EQ(hung, 1);
  auto device = registry.SelectDevice();
  ASSERT_TRUE(device.ok()) << device.status();
  EXPECT_EQ(device->backend()->name(), "reference");
}

TEST(HostilePlugins, InconsistentDeviceDataIsRefused) {
  Registry registry;
  auto b = registry.Load(Hostile("bad_device"));
  ASSERT_FALSE(b.ok());
  EXPECT_THAT(b.status().message(), HasSubstr("alignment 3"));
}

TEST(HostilePlugins, AnUnterminatedNameIsCutNotOverread) {
  Registry registry;
  auto b = registry.Load(Hostile("unterminated"));
  ASSERT_FALSE(b.ok());  // 4096 'x's: longer than a name may be.
  EXPECT_THAT(b.status().message(), HasSubstr("empty or overlong name"));
}

TEST(HostilePlugins, AHugeStructSizeReadsOnlyKnownFields) {
  // A bigger table means a newer minor version: the host reads what it
  // knows and ignores the rest.
  Registry registry;
  auto b = registry.Load(Hostile("huge_struct"));
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ((*b)->devices().size(), 1u);
}

TEST(HostilePlugins, ALeakyPluginStillServesAllocations) {
  Registry registry;
  auto b = registry.Load(Hostile("leaky"));
  ASSERT_TRUE(b.ok()) << b.status();
  const Device d(*b, 0);
  for (int i = 0; i < 100; ++i) {
    auto t = empty({1024}, DType::kF32, d);
    ASSERT_TRUE(t.ok());
  }
  // The caching allocator reuses one block instead of asking each time.
  EXPECT_EQ(d.backend()->allocator(0).stats().num_plugin_allocations, 1u);
}

}  // namespace
}  // namespace mixrt
