// The version-skew matrix of the plugin ABI: plugins and hosts one minor
// version apart in both directions, a major version apart, a plugin that
// declines a host, and attribute structs shorter or longer than a side
// expects. Built from one SDK plugin (tests/fixtures/skew_plugin.cc).
#include <dlfcn.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "core/kernels/pointwise.h"
#include "core/plugin/plugin_loader.h"
#include "core/plugin/plugin_profiling.h"
#include "core/plugin/registry.h"
#include "core/tensor/factories.h"
#include "core/tensor/op_fallback.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "plugins/sdk/plugin.h"
#include "tests/testing/test_plugins.h"

namespace mixrt {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::string Skew(const std::string& variant) {
  return testing::RunfilePath("tests/fixtures/libmixrt_skew_" + variant +
                              ".so");
}

// The table `variant`'s entry returns to a host of ABI major.minor.
const MixrtPluginApi* Entry(const std::string& variant, uint32_t major,
                            uint32_t minor) {
  void* handle = dlopen(Skew(variant).c_str(), RTLD_NOW | RTLD_LOCAL);
  EXPECT_NE(handle, nullptr) << dlerror();
  if (handle == nullptr) return nullptr;
  auto* entry = reinterpret_cast<MixrtPluginEntryFn*>(
      dlsym(handle, MIXRT_PLUGIN_ENTRY_SYMBOL));
  EXPECT_NE(entry, nullptr);
  return entry != nullptr ? entry(major, minor) : nullptr;
}

// Every test loads into its own registry; fallbacks go nowhere.
class AbiSkew : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(SetFallbackPolicy("off").ok()); }
  void TearDown() override {
    ASSERT_TRUE(SetFallbackPolicy(std::nullopt).ok());
  }

  Device Load(const std::string& variant) {
    auto backend = registry_.Load(Skew(variant));
    EXPECT_TRUE(backend.ok()) << backend.status();
    return backend.ok() ? Device(*backend, 0) : Device();
  }

  Registry registry_;
};

TEST_F(AbiSkew, CurrentPluginAnswersPerOp) {
  const Device dev = Load("1_1");
  ASSERT_TRUE(dev.valid());
  EXPECT_EQ(dev.backend()->identity().abi_minor, 1u);
  EXPECT_TRUE(dev.backend()->has_op_support_query());
  EXPECT_TRUE(dev.backend()->has_kernel_graphs());
  // Fusion: every 1.1 SDK plugin has the functions; this one claims nothing.
  EXPECT_TRUE(dev.backend()->has_fusion());
  // The weight-version notice, appended after them, is in the SDK's table.
  const MixrtPluginApi* api = dev.backend()->api();
  ASSERT_TRUE(
      MIXRT_STRUCT_HAS(api, MixrtPluginApi, fused_kernel_set_weight_version));
  EXPECT_NE(api->fused_kernel_set_weight_version, nullptr);
  OpSignature sub{MIXRT_OP_BINARY, MIXRT_BINARY_SUB, DType::kF32, DType::kF32};
  EXPECT_FALSE(dev.backend()->RunsOp(0, sub));
  OpSignature add{MIXRT_OP_BINARY, MIXRT_BINARY_ADD, DType::kF32, DType::kF32};
  EXPECT_TRUE(dev.backend()->RunsOp(0, add));
}

// ABI 1.2's optional functions through the SDK: the device's memory, the
// precisions beyond the storage dtypes, and profiling ranges around each
// launch while profiling is on (never while it is off).
TEST_F(AbiSkew, Abi12PluginReportsMemoryPrecisionsAndRanges) {
  const Device dev = Load("1_2");
  ASSERT_TRUE(dev.valid());
  EXPECT_EQ(dev.backend()->identity().abi_minor, 2u);
  auto memory = dev.backend()->GetMemoryInfo(0);
  ASSERT_TRUE(memory.ok()) << memory.status();
  EXPECT_EQ(memory->total_bytes,
            static_cast<uint64_t>(sysconf(_SC_PHYS_PAGES)) *
                static_cast<uint64_t>(sysconf(_SC_PAGESIZE)));
  EXPECT_GT(memory->free_bytes, 0u);
  EXPECT_LE(memory->free_bytes, memory->total_bytes);
  EXPECT_EQ(
      dev.info().precision(MIXRT_OP_CLASS_MATMUL, MIXRT_PRECISION_TF32).level,
      MIXRT_SUPPORT_NATIVE);
  const CapabilityEntry& fp8 =
      dev.info().precision(MIXRT_OP_CLASS_MATMUL, MIXRT_PRECISION_FP8_E4M3);
  EXPECT_EQ(fp8.level, MIXRT_SUPPORT_UNSUPPORTED);
  EXPECT_EQ(fp8.reason, "the skew plugin declares TF32 matmul only");

  ASSERT_TRUE(dev.backend()->has_profiler_ranges());
  const std::string ranges =
      std::string(std::getenv("TEST_TMPDIR")) + "/skew_ranges.txt";
  std::remove(ranges.c_str());
  setenv("MIXRT_SKEW_RANGES", ranges.c_str(), 1);
  auto x = full({3}, 1.5, DType::kF32, dev);
  ASSERT_TRUE(x.ok()) << x.status();
  SetPluginProfiling(true);
  auto sum = kernels::add(*x, *x);
  SetPluginProfiling(false);
  ASSERT_TRUE(sum.ok()) << sum.status();
  auto again = kernels::add(*x, *x);  // Profiling off: no range.
  ASSERT_TRUE(again.ok()) << again.status();
  unsetenv("MIXRT_SKEW_RANGES");
  std::ifstream in(ranges);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  ASSERT_EQ(lines.size(), 2u) << ::testing::PrintToString(lines);
  const std::string id = lines[0].substr(6, lines[0].find(' ', 6) - 6);
  EXPECT_EQ(lines[0], "begin " + id + " binary f32");
  EXPECT_EQ(lines[1], "end " + id + " binary f32");
}

// A plugin built on the 1.1 header lacks them: the host does without.
TEST_F(AbiSkew, Abi11PluginLacksThe12Functions) {
  const Device dev = Load("1_1");
  ASSERT_TRUE(dev.valid());
  EXPECT_EQ(dev.backend()->api()->struct_size,
            MIXRT_PLUGIN_API_STRUCT_SIZE_1_1);
  EXPECT_TRUE(absl::IsUnimplemented(dev.backend()->GetMemoryInfo(0).status()));
  EXPECT_FALSE(dev.backend()->has_profiler_ranges());
  const CapabilityEntry& tf32 =
      dev.info().precision(MIXRT_OP_CLASS_MATMUL, MIXRT_PRECISION_TF32);
  EXPECT_EQ(tf32.level, MIXRT_SUPPORT_UNSUPPORTED);
  EXPECT_THAT(tf32.reason, HasSubstr("before ABI 1.2"));
  SetPluginProfiling(true);  // Nothing to call: launches run as ever.
  auto x = full({2}, 2.0, DType::kF32, dev);
  SetPluginProfiling(false);
  ASSERT_TRUE(x.ok()) << x.status();
  EXPECT_THAT(*x->to_float_vector(), ElementsAre(2, 2));
}

// A plugin built on the 1.0 header: no per-op query, so its class matrix
// decides; its table ends where 1.0's did and the host reads no further.
TEST_F(AbiSkew, OlderPluginOnNewerHost) {
  const Device dev = Load("1_0");
  ASSERT_TRUE(dev.valid());
  EXPECT_EQ(dev.backend()->identity().abi_minor, 0u);
  EXPECT_EQ(dev.backend()->api()->struct_size,
            MIXRT_PLUGIN_API_STRUCT_SIZE_1_0);
  EXPECT_FALSE(dev.backend()->has_op_support_query());
  // No kernel graphs either: the compiler launches one by one.
  EXPECT_FALSE(dev.backend()->has_kernel_graphs());
  EXPECT_TRUE(absl::IsUnimplemented(
      dev.backend()->CreateKernelGraph(0, 0, {}).status()));
  // Nor fusion: the compiler offers it nothing and runs op by op.
  EXPECT_FALSE(dev.backend()->has_fusion());
  MixrtFusionGraph empty{};
  empty.struct_size = sizeof(empty);
  EXPECT_TRUE(
      absl::IsUnimplemented(dev.backend()->ClaimFusion(0, empty).status()));
  auto x = full({3}, 1.5, DType::kF32, dev);
  ASSERT_TRUE(x.ok()) << x.status();
  auto sum = kernels::add(*x, *x);
  ASSERT_TRUE(sum.ok()) << sum.status();
  EXPECT_THAT(*sum->to_float_vector(), ElementsAre(3, 3, 3));
  // Class cast/f16 is unsupported: never launched.
  auto h = full({3}, 1, DType::kF16, dev);
  ASSERT_FALSE(h.ok());
  EXPECT_TRUE(IsDeclaredUnsupported(h.status()));
  EXPECT_THAT(h.status().message(),
              HasSubstr("its class matrix says cast/f16 unsupported"));
  // Class elementwise/f32 claims sub, which it lacks: the launch is made
  // and its refusal names the op.
  auto diff = kernels::sub(*x, *x);
  ASSERT_FALSE(diff.ok());
  EXPECT_THAT(diff.status().message(),
              HasSubstr("backend 'skew_1_0' kernel_launch(binary)"));
}

// A plugin built on a newer header, whose fill attributes gained a field:
// this host's shorter struct is zero-filled, not refused.
TEST_F(AbiSkew, NewerPluginOnOlderHost) {
  const Device dev = Load("future_attrs");
  ASSERT_TRUE(dev.valid());
  auto x = full({4}, 2.5, DType::kF32, dev);
  ASSERT_TRUE(x.ok()) << x.status();
  EXPECT_THAT(*x->to_float_vector(), ElementsAre(2.5, 2.5, 2.5, 2.5));

  // And a table from a newer SDK serves a 1.0 host, which reads only the
  // 1.0 part of it.
  const MixrtPluginApi* api = Entry("1_1", 1, 0);
  ASSERT_NE(api, nullptr);
  EXPECT_GE(api->struct_size, MIXRT_PLUGIN_API_STRUCT_SIZE_1_0);
  MixrtPlugin_Initialize_Args init{};
  init.struct_size = sizeof(init);
  EXPECT_EQ(api->plugin_initialize(&init), nullptr);
}

TEST_F(AbiSkew, MajorMismatchIsDeclinedWithBothVersions) {
  // The host refuses a plugin of another major (fixture_wrong_major, in
  // plugin_loader_test); here the SDK declines a host of another major.
  const MixrtPluginApi* api = Entry("needs_1_3", 2, 0);
  ASSERT_NE(api, nullptr);
  MixrtPlugin_Initialize_Args init{};
  init.struct_size = sizeof(init);
  MixrtError* error = api->plugin_initialize(&init);
  ASSERT_NE(error, nullptr);
  const absl::Status status =
      PluginErrorToStatus(api, error, "skew_needs_1_3", "plugin_initialize");
  EXPECT_THAT(status.message(),
              HasSubstr("the plugin was built for ABI 1.x; the host speaks "
                        "2.0"));
}

TEST_F(AbiSkew, APluginMayDeclineAnOlderHostWithAReason) {
  auto backend = registry_.Load(Skew("needs_1_3"));
  ASSERT_FALSE(backend.ok());
  EXPECT_THAT(std::string(backend.status().message()),
              HasSubstr("the skew plugin needs a host of ABI 1.3 or newer; "
                        "this host speaks 1.2"));
  ASSERT_EQ(registry_.Reports().size(), 1u);
  EXPECT_EQ(registry_.Reports()[0].state, PluginState::kFailed);
}

struct FutureMatmulAttrs {  // MixrtMatmulAttrs plus a field "since 1.3".
  size_t struct_size;
  MixrtExtensionBase* ext;
  uint32_t activation;
  float beta;
  double alpha;
};

}  // namespace
}  // namespace mixrt

namespace mixrt::sdk {
template <>
struct AttrsFirstVersion<mixrt::FutureMatmulAttrs> {
  static constexpr size_t kSize = AttrsFirstVersion<MixrtMatmulAttrs>::kSize;
};
}  // namespace mixrt::sdk

namespace mixrt {
namespace {

TEST(AttrsSkew, ShortStructsAreZeroFilledAndTooShortOnesRefused) {
  MixrtMatmulAttrs host{};
  host.struct_size = sizeof(host);
  host.activation = MIXRT_ACTIVATION_RELU;
  host.beta = 1.0f;
  sdk::KernelCall call;
  call.attrs = &host;
  // The plugin's struct is longer: the missing field reads 0.
  auto future = call.GetAttrs<FutureMatmulAttrs>();
  ASSERT_TRUE(future.ok()) << future.status();
  EXPECT_NE(static_cast<const void*>(*future), &host);
  EXPECT_EQ((*future)->activation, MIXRT_ACTIVATION_RELU);
  EXPECT_EQ((*future)->beta, 1.0f);
  EXPECT_EQ((*future)->alpha, 0.0);
  // Same size: read in place.
  auto same = call.GetAttrs<MixrtMatmulAttrs>();
  ASSERT_TRUE(same.ok());
  EXPECT_EQ(*same, &host);
  // Shorter than the first version: refused, with both sizes.
  host.struct_size = MIXRT_STRUCT_SIZE_THROUGH(MixrtMatmulAttrs, activation);
  auto short_one = call.GetAttrs<MixrtMatmulAttrs>();
  ASSERT_FALSE(short_one.ok());
  EXPECT_THAT(short_one.status().message(),
              HasSubstr(absl::StrCat("struct_size ", host.struct_size,
                                     "; the op's attribute struct has at "
                                     "least ",
                                     sizeof(MixrtMatmulAttrs), " bytes")));
  call.attrs = nullptr;
  EXPECT_FALSE(call.GetAttrs<MixrtMatmulAttrs>().ok());
}

}  // namespace
}  // namespace mixrt
