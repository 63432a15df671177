// The fallback scheduler between devices that do not share memory: a device
// (the fake accelerator, reporting device memory) that lacks an op class has
// it run on the reference plugin, operands copied there and results back,
// views, broadcasts and in-place outputs included, and counted.
#include "core/tensor/op_fallback.h"

#include <cstdlib>
#include <vector>

#include "core/kernels/optimizer_kernels.h"
#include "core/kernels/pointwise.h"
#include "core/plugin/registry.h"
#include "core/tensor/factories.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/test_plugins.h"

namespace mixrt {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

class OpFallback : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    // Read by the fixture at every query; the host caches its answers, so
    // they are set before the first one.
    setenv("MIXRT_FAKE_DEVICE_MEMORY", "1", 1);
    setenv("MIXRT_FAKE_UNSUPPORTED", "elementwise/f32,optimizer/f32", 1);
    testing::ReferenceDevice();  // The fallback: host memory, runs all.
    auto fake = Registry::Global().Load(
        testing::RunfilePath("tests/fixtures/libmixrt_fake_accelerator.so"));
    ASSERT_TRUE(fake.ok()) << fake.status();
    device_ = new Device(*fake, 0);
  }
  void SetUp() override {
    ASSERT_TRUE(SetFallbackPolicy("auto").ok());
    ASSERT_FALSE(device_->has_flag(MIXRT_DEVICE_FLAG_HOST_MEMORY));
  }
  void TearDown() override {
    ASSERT_TRUE(SetFallbackPolicy(std::nullopt).ok());
  }

  static Device* device_;
};
Device* OpFallback::device_ = nullptr;

TEST_F(OpFallback, StridedAndBroadcastOperandsAreCopiedAcrossAndBack) {
  auto x = from_floats({1, 2, 3, 4, 5, 6}, {2, 3}, DType::kF32, *device_);
  ASSERT_TRUE(x.ok()) << x.status();
  auto t = x->transpose(0, 1);  // [3, 2], strided.
  auto row = from_floats({10, 20}, {1, 2}, DType::kF32, *device_);
  ASSERT_TRUE(row.ok());
  const FallbackCounters before = GetFallbackCounters();
  auto sum = kernels::add(*t, *row->expand({3, 2}));  // Broadcast: stride 0.
  ASSERT_TRUE(sum.ok()) << sum.status();
  EXPECT_EQ(sum->device(), *device_);
  EXPECT_THAT(*sum->to_float_vector(), ElementsAre(11, 24, 12, 25, 13, 26));
  const FallbackCounters after = GetFallbackCounters();
  EXPECT_EQ(after.launches - before.launches, 1);
  // In: x's 6 floats and the row's 2; the output's 6 there and back.
  EXPECT_EQ(after.copies - before.copies, 4);
  EXPECT_EQ(after.bytes_copied - before.bytes_copied, (6 + 2 + 6 + 6) * 4);
  EXPECT_THAT(FallbackLog(),
              ::testing::Contains(HasSubstr(
                  "fake_accelerator: binary/add f32 ran on reference:0 "
                  "(declared unsupported: fake: marked unsupported)")));
}

TEST_F(OpFallback, InPlaceOutputsComeBackIntoTheirViews) {
  // The parameter is a slice of a larger storage: only its span travels and
  // the rest of the storage is left as it was.
  auto storage =
      from_floats({1, 2, 3, 4, 5, 6, 7, 8}, {8}, DType::kF32, *device_);
  ASSERT_TRUE(storage.ok());
  auto param = storage->slice(0, 2, 6);
  ASSERT_TRUE(param.ok());
  auto grad = from_floats({1, 1, 2, 2}, {4}, DType::kF32, *device_);
  ASSERT_TRUE(grad.ok());
  MixrtSgdAttrs attrs{};
  attrs.struct_size = sizeof(attrs);
  attrs.lr = 0.5;
  ASSERT_TRUE(kernels::sgd_step_(*param, *grad, Tensor(), attrs).ok());
  EXPECT_THAT(*storage->to_float_vector(),
              ElementsAre(1, 2, 2.5, 3.5, 4, 5, 7, 8));
}

TEST_F(OpFallback, OffMeansTheLaunchFailsNamingTheOp) {
  ASSERT_TRUE(SetFallbackPolicy("off").ok());
  auto x = full({3}, 1, DType::kF32, *device_);
  ASSERT_TRUE(x.ok()) << x.status();
  auto y = kernels::mul(*x, *x);
  ASSERT_FALSE(y.ok());
  EXPECT_TRUE(IsDeclaredUnsupported(y.status()));
  EXPECT_THAT(y.status().message(),
              HasSubstr("fake_accelerator:0 does not run binary/mul f32"));
  // A named fallback that is not loaded is said so.
  ASSERT_TRUE(SetFallbackPolicy("nonesuch").ok());
  y = kernels::mul(*x, *x);
  ASSERT_FALSE(y.ok());
  EXPECT_THAT(y.status().message(),
              HasSubstr("MIXRT_FALLBACK=nonesuch names no usable backend"));
}

}  // namespace
}  // namespace mixrt
