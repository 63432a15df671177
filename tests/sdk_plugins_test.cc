// Plugins written with the SDK: the guide's example plugin works through the
// host (including the contiguity contract), and exceptions never cross the
// ABI.
#include <set>
#include <string>
#include <vector>

#include "core/kernels/pointwise.h"
#include "core/plugin/registry.h"
#include "core/tensor/factories.h"
#include "core/tensor/op_fallback.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "mixrt/op_names.h"
#include "tests/testing/test_plugins.h"

namespace mixrt {
namespace {

using namespace ::mixrt::kernels;  // The ops under test.

using ::testing::ElementsAre;
using ::testing::HasSubstr;

Device Load(const std::string& path) {
  auto backend = Registry::Global().Load(testing::RunfilePath(path));
  EXPECT_TRUE(backend.ok()) << backend.status();
  return backend.ok() ? Device(*backend, 0) : Device();
}

TEST(ExamplePlugin, AddsStridedTensorsThroughContiguousCopies) {
  const Device dev = Load("plugins/example/libmixrt_example.so");
  ASSERT_TRUE(dev.valid());
  EXPECT_TRUE(dev.has_flag(MIXRT_DEVICE_FLAG_NEEDS_CONTIGUOUS));
  auto a = from_floats({1, 2, 3, 4, 5, 6}, {2, 3}, DType::kF32, dev);
  ASSERT_TRUE(a.ok()) << a.status();
  auto t = a->transpose(0, 1);  // Not contiguous: the host copies it first.
  auto b = full({3, 2}, 10, DType::kF32, dev);
  ASSERT_TRUE(b.ok()) << b.status();
  auto sum = add(*t, *b);
  ASSERT_TRUE(sum.ok()) << sum.status();
  EXPECT_THAT(*sum->to_float_vector(), ElementsAre(11, 14, 12, 15, 13, 16));
}

TEST(ExamplePlugin, OpsItDeclaresUnsupportedAreNeverLaunchedOnIt) {
  const Device dev = Load("plugins/example/libmixrt_example.so");
  ASSERT_TRUE(dev.valid());
  EXPECT_EQ(dev.info().capability(MIXRT_OP_CLASS_MATMUL, DType::kF32).level,
            MIXRT_SUPPORT_UNSUPPORTED);
  ASSERT_TRUE(SetFallbackPolicy("off").ok());
  auto h = full({4}, 1, DType::kF16, dev);
  ASSERT_FALSE(h.ok());
  EXPECT_TRUE(absl::IsUnimplemented(h.status())) << h.status();
  EXPECT_TRUE(IsDeclaredUnsupported(h.status())) << h.status();
  // Named by op, variant and dtype, with the plugin's reason and the way out.
  EXPECT_THAT(h.status().message(),
              HasSubstr("example:0 does not run fill f16: declared "
                        "unsupported: the example plugin only runs f32"));
  EXPECT_THAT(h.status().message(), HasSubstr("MIXRT_FALLBACK=0"));
  auto x = full({4}, 3, DType::kF32, dev);
  ASSERT_TRUE(x.ok()) << x.status();
  EXPECT_THAT(mul(*x, *x).status().message(),
              HasSubstr("does not run binary/mul f32"));
  ASSERT_TRUE(SetFallbackPolicy(std::nullopt).ok());
}

TEST(ExamplePlugin, OpsItLacksRunOnTheFallbackBackend) {
  const Device dev = Load("plugins/example/libmixrt_example.so");
  ASSERT_TRUE(dev.valid());
  ASSERT_TRUE(Registry::Global()
                  .Load(testing::RunfilePath("backends/cpu/libmixrt_cpu.so"))
                  .ok());
  ASSERT_TRUE(SetFallbackPolicy("auto").ok());
  const FallbackCounters before = GetFallbackCounters();
  auto x = from_floats({1, 2, 3, 4, 5, 6}, {2, 3}, DType::kF32, dev);
  ASSERT_TRUE(x.ok()) << x.status();
  auto t = x->transpose(0, 1);
  auto product = mul(*t, *t);  // On the CPU plugin, written into example's.
  ASSERT_TRUE(product.ok()) << product.status();
  EXPECT_EQ(product->device(), dev);
  EXPECT_THAT(*product->to_float_vector(), ElementsAre(1, 16, 4, 25, 9, 36));
  auto sum = add(*product, *product);  // The plugin's own add.
  ASSERT_TRUE(sum.ok()) << sum.status();
  EXPECT_THAT(*sum->to_float_vector(), ElementsAre(2, 32, 8, 50, 18, 72));
  auto half = full({3}, 1.5, DType::kF16, dev);
  ASSERT_TRUE(half.ok()) << half.status();
  EXPECT_THAT(*half->to_float_vector(), ElementsAre(1.5, 1.5, 1.5));
  const FallbackCounters after = GetFallbackCounters();
  EXPECT_EQ(after.launches - before.launches, 2);  // mul, fill f16.
  // Both devices are host memory: the CPU plugin reads example's memory.
  EXPECT_EQ(after.bytes_copied, before.bytes_copied);
  EXPECT_THAT(FallbackLog(),
              ::testing::IsSupersetOf(
                  {HasSubstr("example: binary/mul f32 ran on cpu:0 (declared "
                             "unsupported: the example plugin only runs"),
                   HasSubstr("example: fill f16 ran on cpu:0")}));
  ASSERT_TRUE(SetFallbackPolicy(std::nullopt).ok());
}

TEST(Sdk, ExceptionsBecomeErrorsAtTheBoundary) {
  const Device dev = Load("tests/fixtures/libmixrt_throwing.so");
  ASSERT_TRUE(dev.valid());
  auto x = full({4}, 1, DType::kF32, dev);
  ASSERT_FALSE(x.ok());
  EXPECT_TRUE(absl::IsInternal(x.status()));
  EXPECT_THAT(x.status().message(),
              HasSubstr("plugin threw an exception: kernel exploded"));
}

TEST(Sdk, RejectsMalformedLaunchesFromAHost) {
  // A host that passes garbage descriptors gets an error, not a crash.
  const Device dev = Load("plugins/reference/libmixrt_reference.so");
  ASSERT_TRUE(dev.valid());
  const int64_t shape[] = {4};
  const int64_t negative_stride[] = {-1};
  MixrtTensorDesc bad{};
  bad.struct_size = sizeof(bad);
  bad.dtype = 99;
  bad.ndim = 1;
  bad.shape = shape;
  bad.strides = negative_stride;
  auto status = dev.backend()->Launch(0, MIXRT_OP_FILL, {}, {&bad, 1}, nullptr);
  EXPECT_THAT(status.message(), HasSubstr("dtype 99"));
  bad.dtype = MIXRT_DTYPE_F32;
  status = dev.backend()->Launch(0, MIXRT_OP_FILL, {}, {&bad, 1}, nullptr);
  EXPECT_THAT(status.message(), HasSubstr("negative size or stride"));
  bad.ndim = MIXRT_MAX_DIMS + 1;
  status = dev.backend()->Launch(0, MIXRT_OP_FILL, {}, {&bad, 1}, nullptr);
  EXPECT_THAT(status.message(), HasSubstr("ndim 9"));
  // An op newer than the plugin: the first number past its table (a C++
  // MixrtOp holds only 0..63, its enumerators' bit width; 1000 would be
  // undefined behaviour, which UBSan reports).
  status = dev.backend()->Launch(0, MIXRT_OP_COUNT, {}, {}, nullptr);
  EXPECT_TRUE(absl::IsUnimplemented(status)) << status;
  MixrtTensorDesc ok_desc = bad;
  ok_desc.ndim = 1;
  ok_desc.strides = shape;  // Positive strides, but NULL data.
  status = dev.backend()->Launch(0, MIXRT_OP_FILL, {}, {&ok_desc, 1}, nullptr);
  EXPECT_THAT(status.message(), HasSubstr("NULL data"));
  float buffer[4];
  ok_desc.data = buffer;  // Valid now, but FILL without its attributes.
  status = dev.backend()->Launch(0, MIXRT_OP_FILL, {}, {&ok_desc, 1}, nullptr);
  EXPECT_THAT(status.message(), HasSubstr("attributes missing"));
}

// Errors on both sides of the ABI name ops by name: every op has one, and no
// two share it.
TEST(Sdk, EveryOpHasItsOwnName) {
  std::set<std::string> names;
  for (int op = 0; op < MIXRT_OP_COUNT; ++op) {
    const std::string name = MixrtOpName(static_cast<MixrtOp>(op));
    EXPECT_NE(name, "unknown op") << "op " << op;
    EXPECT_TRUE(names.insert(name).second) << name << " named twice";
  }
  EXPECT_STREQ(MixrtOpName(MIXRT_OP_MATMUL), "matmul");
}

// The CPU plugin checks arguments with the SDK's words, naming the op.
TEST(Sdk, TheCpuPluginRefusesMalformedCallsWithTheSdksWords) {
  ASSERT_EQ(setenv("MIXRT_CPU_SKIP_PROBE", "1", 1), 0);
  const Device dev = Load("backends/cpu/libmixrt_cpu.so");
  ASSERT_TRUE(dev.valid());
  float a[4] = {}, b[2] = {};
  const int64_t four[] = {4}, two[] = {2}, one[] = {1};
  auto desc = [&](float* data, const int64_t* shape) {
    MixrtTensorDesc d{};
    d.struct_size = sizeof(d);
    d.data = data;
    d.dtype = MIXRT_DTYPE_F32;
    d.ndim = 1;
    d.shape = shape;
    d.strides = one;
    return d;
  };
  const MixrtTensorDesc x = desc(a, four), short_x = desc(b, two);
  MixrtPointwiseAttrs add{};
  add.struct_size = sizeof(add);
  add.kind = MIXRT_BINARY_ADD;
  const MixrtTensorDesc ins[] = {x, short_x};
  auto status =
      dev.backend()->Launch(0, MIXRT_OP_BINARY, {ins, 2}, {&x, 1}, &add);
  EXPECT_THAT(status.message(),
              HasSubstr("binary: an input's shape differs from the output's"));
  status = dev.backend()->Launch(0, MIXRT_OP_BINARY, {ins, 1}, {&x, 1}, &add);
  EXPECT_THAT(status.message(), HasSubstr("binary takes 2-2 input(s)"));
  MixrtSgdAttrs sgd{};
  sgd.struct_size = sizeof(sgd);
  status =
      dev.backend()->Launch(0, MIXRT_OP_SGD_STEP, {&short_x, 1}, {&x, 1}, &sgd);
  EXPECT_THAT(status.message(),
              HasSubstr("sgd_step: the gradient must be floating, with the "
                        "param's shape"));
  MixrtDropoutAttrs dropout{};
  dropout.struct_size = sizeof(dropout);
  dropout.p = 1.5;
  status =
      dev.backend()->Launch(0, MIXRT_OP_DROPOUT, {&x, 1}, {&x, 1}, &dropout);
  EXPECT_THAT(status.message(),
              HasSubstr("dropout: p must be in [0, 1), got 1.5"));
  dropout.p = 0.5;
  status = dev.backend()->Launch(0, MIXRT_OP_DROPOUT, {&short_x, 1}, {&x, 1},
                                 &dropout);
  EXPECT_THAT(status.message(),
              HasSubstr("dropout: an input's shape differs from the output's"));
}

}  // namespace
}  // namespace mixrt
