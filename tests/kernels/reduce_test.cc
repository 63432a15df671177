// Reductions on the reference plugin against host loops.
#include "core/kernels/reduce.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <string>
#include <vector>

#include "core/plugin/registry.h"
#include "core/tensor/factories.h"
#include "core/tensor/op_profile.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/op_test_util.h"
#include "tests/testing/test_plugins.h"

namespace mixrt::kernels {
namespace {

using ::testing::ElementsAre;
using testing::ExpectClose;
using ::testing::HasSubstr;
using testing::MakeTensor;
using testing::Values;

class ReduceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    device_ = testing::ReferenceDevice();
    data_ = testing::RandomValues(2 * 3 * 5, 11);
    x_ = MakeTensor(device_, data_, {2, 3, 5});
  }
  double At(int i, int j, int k) const { return data_[i * 15 + j * 5 + k]; }

  Device device_;
  std::vector<float> data_;
  Tensor x_;
};

TEST_F(ReduceTest, SumAndMeanOverEverySubsetOfAxes) {
  const double tol = 1e-6;
  for (uint32_t mask = 0; mask < 8; ++mask) {
    std::vector<int64_t> dims;
    for (int d = 0; d < 3; ++d) {
      if (mask & (1u << d)) dims.push_back(d);
    }
    if (dims.empty()) continue;  // Empty dims means "all": tested below.
    const int n0 = (mask & 1) ? 1 : 2, n1 = (mask & 2) ? 1 : 3,
              n2 = (mask & 4) ? 1 : 5;
    std::vector<double> sums(n0 * n1 * n2, 0.0);
    int count = 0;
    for (int i = 0; i < 2; ++i)
      for (int j = 0; j < 3; ++j)
        for (int k = 0; k < 5; ++k) {
          const int o = ((mask & 1) ? 0 : i) * n1 * n2 +
                        ((mask & 2) ? 0 : j) * n2 + ((mask & 4) ? 0 : k);
          sums[o] += At(i, j, k);
        }
    count = (mask & 1 ? 2 : 1) * (mask & 2 ? 3 : 1) * (mask & 4 ? 5 : 1);
    std::vector<double> means = sums;
    for (double& m : means) m /= count;
    auto s = sum(x_, dims, /*keepdim=*/true);
    ASSERT_TRUE(s.ok()) << s.status();
    EXPECT_THAT(s->shape(), ElementsAre(n0, n1, n2));
    ExpectClose(Values(s), sums, tol, tol, absl::StrCat("sum mask ", mask));
    ExpectClose(Values(mean(x_, dims)), means, tol, tol,
                absl::StrCat("mean mask ", mask));
  }
  auto all = sum(x_);
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(all->ndim(), 0);
  double total = 0;
  for (float v : data_) total += v;
  EXPECT_NEAR(*all->item(), total, 1e-5);
}

TEST_F(ReduceTest, ExtremaVarianceAndStd) {
  auto mx = amax(x_, {-1});
  auto mn = amin(x_, {-1});
  auto am = abs_max(x_, {0, 1, 2});
  auto v = var(x_, {1});
  auto v0 = var(x_, {1}, /*correction=*/0);
  auto sd = std(x_, {1});
  std::vector<double> want_max, want_min, want_var, want_var0, want_std;
  double want_abs = 0;
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 3; ++j) {
      double hi = -INFINITY, lo = INFINITY;
      for (int k = 0; k < 5; ++k) {
        hi = std::max(hi, At(i, j, k));
        lo = std::min(lo, At(i, j, k));
        want_abs = std::max(want_abs, std::fabs(At(i, j, k)));
      }
      want_max.push_back(hi);
      want_min.push_back(lo);
    }
  for (int i = 0; i < 2; ++i)
    for (int k = 0; k < 5; ++k) {
      double m = 0, ss = 0;
      for (int j = 0; j < 3; ++j) m += At(i, j, k) / 3;
      for (int j = 0; j < 3; ++j) ss += (At(i, j, k) - m) * (At(i, j, k) - m);
      want_var.push_back(ss / 2);
      want_var0.push_back(ss / 3);
      want_std.push_back(std::sqrt(ss / 2));
    }
  ExpectClose(Values(mx), want_max, 0, 0, "amax");
  ExpectClose(Values(mn), want_min, 0, 0, "amin");
  EXPECT_EQ(Values(am)[0], want_abs);
  ExpectClose(Values(v), want_var, 1e-6, 1e-7, "var");
  ExpectClose(Values(v0), want_var0, 1e-6, 1e-7, "var correction 0");
  ExpectClose(Values(sd), want_std, 1e-6, 1e-7, "std");
}

TEST_F(ReduceTest, HalfPrecisionAccumulatesInWideFloat) {
  // 4096 ones in f16: an f16 accumulator would stall at 2048.
  auto ones_h = full({4096}, 1.0, DType::kF16, device_);
  ASSERT_TRUE(ones_h.ok());
  EXPECT_EQ(*sum(*ones_h)->item(), 4096.0);
  auto ones_b = full({1000}, 0.1, DType::kBF16, device_);
  ASSERT_TRUE(ones_b.ok());
  // bf16(0.1) = 0.10009765625; 1000 of them, rounded once to bf16.
  EXPECT_NEAR(*sum(*ones_b)->item(), 100.09765625, 0.5);
}

TEST_F(ReduceTest, SumOfHalfPrecisionIntoF32SkipsTheNarrowRounding) {
  // 1000 x bf16(0.1) = 100.09765625 exactly: representable in f32, but not
  // in bf16 (whose neighbours there are 100.0 and 100.5).
  auto tenths = full({1000}, 0.1, DType::kBF16, device_);
  ASSERT_TRUE(tenths.ok());
  auto wide = sum(*tenths, {0}, /*keepdim=*/false, DType::kF32);
  ASSERT_TRUE(wide.ok()) << wide.status();
  EXPECT_EQ(wide->dtype(), DType::kF32);
  EXPECT_EQ(*wide->item(), 100.09765625);
  // Rows of a [2, 500] f16 tensor, as a bias gradient is summed.
  auto rows = full({500, 2}, 0.1, DType::kF16, device_);
  ASSERT_TRUE(rows.ok());
  auto columns = sum(*rows, {0}, /*keepdim=*/false, DType::kF32);
  ASSERT_TRUE(columns.ok()) << columns.status();
  // f16(0.1) = 0.0999755859375; 500 of them.
  EXPECT_THAT(Values(columns), ElementsAre(49.98779296875, 49.98779296875));
  auto narrow = sum(*tenths, {0}, /*keepdim=*/false, DType::kF16);
  EXPECT_THAT(narrow.status().message(),
              HasSubstr("dtype must be the input's (bf16) or f32, got f16"));
}

// A bf16 sum into f32 is ABI 1.2's: a 1.2 plugin gets it as one launch; a
// plugin laid out as 1.1 (which may claim the dtype pair from its masks
// and write its input's dtype) gets the old widen-then-sum. The same
// value either way.
TEST_F(ReduceTest, AWiderOutputIsAskedOnlyOfAbi12Plugins) {
  for (const char* plugin :
       {"libmixrt_fake_accelerator.so", "libmixrt_fake_accelerator_1_1.so"}) {
    Registry registry;
    auto backend = registry.Load(
        testing::RunfilePath(std::string("tests/fixtures/") + plugin));
    ASSERT_TRUE(backend.ok()) << backend.status();
    const Device d(*backend, 0);
    auto tenths = full({4, 250}, 0.1, DType::kBF16, d);
    ASSERT_TRUE(tenths.ok()) << tenths.status();
    ResetOpProfile();
    EnableOpProfile(true);
    auto wide = sum(*tenths, {1}, /*keepdim=*/false, DType::kF32);
    EnableOpProfile(false);
    ASSERT_TRUE(wide.ok()) << wide.status();
    // 250 x bf16(0.1) = 25.0244140625 exactly in f32.
    EXPECT_THAT(Values(wide), ElementsAre(25.0244140625, 25.0244140625,
                                          25.0244140625, 25.0244140625));
    std::vector<std::string> ops;
    for (const OpProfileEntry& e : OpProfileEntries()) ops.push_back(e.op);
    const bool abi_1_2 = (*backend)->identity().abi_minor >= 2;
    EXPECT_EQ(abi_1_2, std::find(ops.begin(), ops.end(),
                                 "reduce bf16 -> f32") != ops.end())
        << plugin;
    EXPECT_EQ(abi_1_2, std::find(ops.begin(), ops.end(), "copy bf16 -> f32") ==
                           ops.end())
        << plugin;
  }
}

TEST_F(ReduceTest, NanPropagatesAndEmptyInputs) {
  Tensor t = MakeTensor(device_, {1, NAN, 3}, {3});
  EXPECT_TRUE(std::isnan(*amax(t)->item()));
  EXPECT_TRUE(std::isnan(*sum(t)->item()));
  auto e = zeros({0, 4}, DType::kF32, device_);
  ASSERT_TRUE(e.ok());
  EXPECT_THAT(Values(sum(*e, {0})), ElementsAre(0, 0, 0, 0));
  EXPECT_THAT(amax(*e, {0}).status().message(), HasSubstr("of size 0"));
  EXPECT_THAT(sum(x_, {0, 0}).status().message(),
              HasSubstr("appears more than once"));
  EXPECT_THAT(sum(x_, {3}).status().message(), HasSubstr("out of range"));
}

// Tensors of every float dtype and awkward sizes (empty, one element, more
// than one GPU chunk), against host math in double on the values stored.
std::vector<Tensor> NormInputs(const Device& d) {
  return {MakeTensor(d, testing::RandomValues(513 * 7, 3), {513, 7}),
          MakeTensor(d, testing::RandomValues(33, 4), {33}, DType::kF16),
          *zeros({0, 4}, DType::kBF16, d),
          MakeTensor(d, {-2.5}, {1}, DType::kBF16),
          MakeTensor(d, testing::RandomValues(70000, 5), {70000})};
}

double HostNorm(const std::vector<Tensor>& tensors) {
  double sum = 0;
  for (const Tensor& t : tensors) {
    auto values = t.to_double_vector();
    EXPECT_TRUE(values.ok()) << values.status();
    if (!values.ok()) return NAN;
    for (double v : *values) sum += v * v;
  }
  return std::sqrt(sum);
}

TEST_F(ReduceTest, MultiTensorNormIsTheTotalL2Norm) {
  const std::vector<Tensor> in = NormInputs(device_);
  auto norm = multi_tensor_norm(in, device_);
  ASSERT_TRUE(norm.ok()) << norm.status();
  EXPECT_EQ(norm->dtype(), DType::kF32);
  EXPECT_EQ(norm->numel(), 1);
  // f32 result of a double sum: one rounding.
  EXPECT_NEAR(*norm->item(), HostNorm(in), HostNorm(in) * 1e-7);
  EXPECT_EQ(*multi_tensor_norm({}, device_)->item(), 0.0);
  // A transposed view is read in its logical order.
  Tensor m = MakeTensor(device_, {3, 4, 0, 0, 12, 0}, {2, 3});
  EXPECT_EQ(*multi_tensor_norm({*m.transpose(0, 1)}, device_)->item(), 13.0);
  Tensor inf = MakeTensor(device_, {1, INFINITY}, {2});
  EXPECT_TRUE(std::isinf(*multi_tensor_norm({x_, inf}, device_)->item()));
  EXPECT_THAT(
      multi_tensor_norm({*from_ints({1}, {1}, DType::kI64, device_)}, device_)
          .status()
          .message(),
      HasSubstr("multi_tensor_norm: expected a floating tensor"));
}

// A plugin without the op (ABI 1.0, or a partial one) gets the same norm
// tensor by tensor.
TEST_F(ReduceTest, MultiTensorNormFallsBackWhenThePluginLacksTheOp) {
  // Read by the fixture at each launch.
  ASSERT_EQ(setenv("MIXRT_FAKE_MISSING_OPS", "multi_tensor_norm", 1), 0);
  Registry registry;
  auto backend = registry.Load(
      testing::RunfilePath("tests/fixtures/libmixrt_fake_accelerator.so"));
  ASSERT_TRUE(backend.ok()) << backend.status();
  const Device fake(*backend, 0);
  const std::vector<Tensor> in = NormInputs(fake);
  auto norm = multi_tensor_norm(in, fake);
  unsetenv("MIXRT_FAKE_MISSING_OPS");
  ASSERT_TRUE(norm.ok()) << norm.status();
  // Per-tensor f32 sums: one f32 rounding per tensor and per addition.
  EXPECT_NEAR(*norm->item(), HostNorm(in), HostNorm(in) * 1e-6);
}

}  // namespace
}  // namespace mixrt::kernels
