// The plugin ABI's compatibility window (plugins/README.md): plugins built
// from frozen sources against the released 1.0 and 1.1 headers, plain C,
// no SDK, every optional entry NULL (tests/fixtures/abi_window/) — both as
// binaries built once and kept, and as today's compiler builds the same
// sources — load on this host, run their ops, and every entry they lack
// answers "unimplemented" or is worked around, never a crash.
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/compiler/compile.h"
#include "core/kernels/optimizer_kernels.h"
#include "core/kernels/pointwise.h"
#include "core/plugin/registry.h"
#include "core/tensor/factories.h"
#include "core/tensor/op_fallback.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "mixrt/status_macros.h"
#include "tests/testing/test_plugins.h"

namespace mixrt {
namespace {

using ::testing::ElementsAre;

struct Fixture {
  const char* file;  // Under tests/fixtures/abi_window/.
  const char* name;  // The backend's name.
  uint32_t abi_minor;
};

void PrintTo(const Fixture& f, std::ostream* os) { *os << f.name; }

class AbiWindow : public ::testing::TestWithParam<Fixture> {
 protected:
  void SetUp() override {
    // An op the plugin lacks must fail on it, not run elsewhere.
    ASSERT_TRUE(SetFallbackPolicy("off").ok());
    auto backend = registry_.Load(testing::RunfilePath(
        std::string("tests/fixtures/abi_window/") + GetParam().file));
    ASSERT_TRUE(backend.ok()) << backend.status();
    device_ = Device(*backend, 0);
  }
  void TearDown() override {
    ASSERT_TRUE(SetFallbackPolicy(std::nullopt).ok());
  }

  Registry registry_;
  Device device_;
};

TEST_P(AbiWindow, LoadsAsTheVersionItWasBuiltFor) {
  const BackendIdentity& id = device_.backend()->identity();
  EXPECT_EQ(id.name, GetParam().name);
  EXPECT_EQ(id.abi_major, 1u);
  EXPECT_EQ(id.abi_minor, GetParam().abi_minor);
  ASSERT_EQ(registry_.Reports().size(), 1u);
  EXPECT_EQ(registry_.Reports()[0].state, PluginState::kUsable);
  // Only a 1.1 plugin has the per-op query; neither has the optional rest.
  EXPECT_EQ(device_.backend()->has_op_support_query(),
            GetParam().abi_minor >= 1);
  EXPECT_FALSE(device_.backend()->has_kernel_graphs());
  EXPECT_FALSE(device_.backend()->has_fusion());
}

TEST_P(AbiWindow, RunsItsOpsExactly) {
  auto x = full({2, 3}, 1.5, DType::kF32, device_);
  ASSERT_TRUE(x.ok()) << x.status();
  auto y = full({2, 3}, -4.0, DType::kF32, device_);
  ASSERT_TRUE(y.ok()) << y.status();
  auto sum = kernels::add(*x, *y);
  ASSERT_TRUE(sum.ok()) << sum.status();
  EXPECT_THAT(*sum->to_float_vector(),
              ElementsAre(-2.5, -2.5, -2.5, -2.5, -2.5, -2.5));
  auto product = kernels::mul(*x, *y);
  ASSERT_TRUE(product.ok()) << product.status();
  EXPECT_THAT(*product->to_float_vector(), ElementsAre(-6, -6, -6, -6, -6, -6));
  // From host data, and a strided view made dense by the plugin's copy.
  const std::vector<float> values = {1, 2, 3, 4, 5, 6};
  auto m = from_floats(values, {2, 3}, DType::kF32, device_);
  ASSERT_TRUE(m.ok()) << m.status();
  auto transposed = m->transpose(0, 1);
  ASSERT_TRUE(transposed.ok()) << transposed.status();
  auto dense = transposed->contiguous();
  ASSERT_TRUE(dense.ok()) << dense.status();
  EXPECT_THAT(*dense->to_float_vector(), ElementsAre(1, 4, 2, 5, 3, 6));
}

TEST_P(AbiWindow, EntriesItLacksAreUnimplementedNeverACrash) {
  // Kernel graphs and fusion (1.1, optional: NULL in both builds).
  EXPECT_TRUE(absl::IsUnimplemented(
      device_.backend()->CreateKernelGraph(0, 0, {}).status()));
  MixrtFusionGraph empty{};
  empty.struct_size = sizeof(empty);
  EXPECT_TRUE(
      absl::IsUnimplemented(device_.backend()->ClaimFusion(0, empty).status()));
  // memory_set (optional since 1.0) is NULL: zeros are filled another way.
  auto z = zeros({4}, DType::kF32, device_);
  ASSERT_TRUE(z.ok()) << z.status();
  EXPECT_THAT(*z->to_float_vector(), ElementsAre(0, 0, 0, 0));
  // An op it does not run: a 1.1 plugin says so per op and the host never
  // launches it; a 1.0 plugin's class matrix claims it and the launch is
  // refused. Either way an error naming the op, with fallback off.
  auto x = full({3}, 2.0, DType::kF32, device_);
  ASSERT_TRUE(x.ok()) << x.status();
  auto diff = kernels::sub(*x, *x);
  ASSERT_FALSE(diff.ok());
  EXPECT_TRUE(absl::IsUnimplemented(diff.status())) << diff.status();
  EXPECT_THAT(std::string(diff.status().message()),
              ::testing::HasSubstr("binary"));
}

// AMSGrad is a flag bit of ABI 1.2: a plugin built before it would step
// as plain AdamW, so the host refuses to send it, naming the version.
TEST_P(AbiWindow, AmsgradIsRefusedNotSentToAnOlderPlugin) {
  auto make = [&] { return zeros({3}, DType::kF32, device_); };
  auto p = make(), g = make(), m = make(), v = make(), v_max = make();
  auto step = zeros({1}, DType::kF32, device_);
  ASSERT_TRUE(p.ok() && g.ok() && m.ok() && v.ok() && v_max.ok() && step.ok());
  MixrtAdamWAttrs attrs{};
  attrs.lr = 0.1;
  attrs.beta1 = 0.9;
  attrs.beta2 = 0.999;
  const absl::Status s =
      kernels::adamw_step_(*p, *g, *m, *v, *step, attrs, {}, *v_max);
  EXPECT_TRUE(absl::IsUnimplemented(s)) << s;
  EXPECT_THAT(std::string(s.message()),
              ::testing::HasSubstr("amsgrad needs a plugin of ABI 1.2"));
}

TEST_P(AbiWindow, CompiledFunctionsRunOpByOpAsEager) {
  auto fn =
      [](const std::vector<Tensor>& in) -> absl::StatusOr<std::vector<Tensor>> {
    MIXRT_ASSIGN_OR_RETURN(Tensor p, kernels::mul(in[0], in[1]));
    MIXRT_ASSIGN_OR_RETURN(Tensor s, kernels::add(p, in[0]));
    return std::vector<Tensor>{s};
  };
  for (const char* mode : {"default", "reduce-overhead"}) {
    auto compiled = compile(fn, {.mode = mode});
    ASSERT_TRUE(compiled.ok()) << compiled.status();
    for (float v : {3.0f, -0.5f}) {  // A trace, then a replay.
      auto a = full({5}, v, DType::kF32, device_);
      auto b = full({5}, 0.25, DType::kF32, device_);
      ASSERT_TRUE(a.ok() && b.ok());
      auto got = (*compiled)({*a, *b});
      ASSERT_TRUE(got.ok()) << mode << ": " << got.status();
      auto want = fn({*a, *b});
      ASSERT_TRUE(want.ok()) << want.status();
      EXPECT_EQ(*(*got)[0].to_float_vector(), *(*want)[0].to_float_vector())
          << mode;
      EXPECT_EQ((*got)[0].to_float_vector()->at(0), v * 0.25f + v) << mode;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    FrozenPlugins, AbiWindow,
    ::testing::Values(Fixture{"prebuilt/libmixrt_window_1_0_prebuilt.so",
                              "window_1_0_prebuilt", 0},
                      Fixture{"prebuilt/libmixrt_window_1_1_prebuilt.so",
                              "window_1_1_prebuilt", 1},
                      Fixture{"libmixrt_window_1_0.so", "window_1_0", 0},
                      Fixture{"libmixrt_window_1_1.so", "window_1_1", 1}),
    [](const ::testing::TestParamInfo<Fixture>& info) {
      return std::string(info.param.name);
    });

}  // namespace
}  // namespace mixrt
