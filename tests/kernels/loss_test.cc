// cross_entropy and mse against host formulas; backward by finite
// differences.
#include "core/kernels/loss.h"

#include <cmath>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/op_test_util.h"
#include "tests/testing/test_plugins.h"

namespace mixrt::kernels {
namespace {

using testing::ExpectClose;
using ::testing::HasSubstr;
using testing::MakeTensor;
using testing::Values;

class LossTest : public ::testing::Test {
 protected:
  void SetUp() override {
    device_ = testing::ReferenceDevice();
    logits_ = testing::RandomValues(kRows * kClasses, 61, 2.0);
    auto t = from_ints(targets_, {kRows}, DType::kI64, device_);
    ASSERT_TRUE(t.ok());
    target_ = *t;
  }

  // PyTorch's definition, written out.
  double HostLoss(const std::vector<double>& z, double eps, int64_t ignore,
                  bool mean) const {
    double total = 0;
    int counted = 0;
    for (int r = 0; r < kRows; ++r) {
      if (targets_[r] == ignore) continue;
      double mx = -INFINITY, s = 0;
      for (int c = 0; c < kClasses; ++c) mx = std::max(mx, z[r * kClasses + c]);
      for (int c = 0; c < kClasses; ++c)
        s += std::exp(z[r * kClasses + c] - mx);
      double smooth = 0;
      for (int c = 0; c < kClasses; ++c) {
        smooth += -(z[r * kClasses + c] - mx - std::log(s)) / kClasses;
      }
      const double nll = -(z[r * kClasses + targets_[r]] - mx - std::log(s));
      total += (1 - eps) * nll + eps * smooth;
      ++counted;
    }
    return mean ? total / counted : total;
  }

  static constexpr int kRows = 5, kClasses = 4;
  std::vector<int64_t> targets_ = {0, 3, 1, 2, 3};
  std::vector<float> logits_;
  Device device_;
  Tensor target_;
};

TEST_F(LossTest, CrossEntropyMatchesTheDefinition) {
  for (double eps : {0.0, 0.1}) {
    for (int64_t ignore : {int64_t{-100}, int64_t{3}}) {
      for (Reduction red : {Reduction::kMean, Reduction::kSum}) {
        CrossEntropyOptions o;
        o.label_smoothing = eps;
        o.ignore_index = ignore;
        o.reduction = red;
        auto loss = cross_entropy(
            MakeTensor(device_, logits_, {kRows, kClasses}), target_, o);
        ASSERT_TRUE(loss.ok()) << loss.status();
        EXPECT_EQ(loss->dtype(), DType::kF32);
        const std::vector<double> z(logits_.begin(), logits_.end());
        EXPECT_NEAR(*loss->item(),
                    HostLoss(z, eps, ignore, red == Reduction::kMean), 1e-5)
            << "eps " << eps << " ignore " << ignore;
      }
    }
  }
}

TEST_F(LossTest, CrossEntropyBackwardMatchesFiniteDifferences) {
  for (Reduction red : {Reduction::kMean, Reduction::kSum}) {
    CrossEntropyOptions o;
    o.label_smoothing = 0.1;
    o.ignore_index = 3;
    o.reduction = red;
    Tensor z = MakeTensor(device_, logits_, {kRows, kClasses});
    Tensor one = MakeTensor(device_, {1.0f}, {});
    const std::vector<double> analytic =
        Values(cross_entropy_backward(one, z, target_, o));
    const std::vector<double> numeric = testing::NumericalGradient(
        [&](const std::vector<double>& v) {
          return HostLoss(v, 0.1, 3, red == Reduction::kMean);
        },
        {logits_.begin(), logits_.end()}, 1e-4);
    ExpectClose(analytic, numeric, 1e-4, 1e-5, "cross_entropy_backward");
  }
}

TEST_F(LossTest, HalfPrecisionLogitsGiveAnF32Loss) {
  Tensor z = MakeTensor(device_, logits_, {kRows, kClasses}, DType::kBF16);
  auto loss = cross_entropy(z, target_);
  ASSERT_TRUE(loss.ok());
  EXPECT_EQ(loss->dtype(), DType::kF32);
  const std::vector<double> zr = Values(z);  // bf16-rounded logits.
  EXPECT_NEAR(*loss->item(), HostLoss(zr, 0, -100, true), 1e-5);
}

TEST_F(LossTest, BadTargetsAreErrorsNotCrashes) {
  Tensor z = MakeTensor(device_, logits_, {kRows, kClasses});
  auto bad = from_ints({0, 1, 4, 0, 0}, {kRows}, DType::kI64, device_);
  auto neg = from_ints({0, -1, 1, 0, 0}, {kRows}, DType::kI64, device_);
  ASSERT_TRUE(bad.ok() && neg.ok());
  EXPECT_THAT(cross_entropy(z, *bad).status().message(),
              HasSubstr("target 4 at row 2 is out of range [0, 4)"));
  EXPECT_THAT(cross_entropy(z, *neg).status().message(),
              HasSubstr("target -1 at row 1"));
  EXPECT_THAT(cross_entropy(z, z).status().message(), HasSubstr("target [N]"));
}

TEST_F(LossTest, MseMatchesHost) {
  const std::vector<float> a = testing::RandomValues(6, 71);
  const std::vector<float> b = testing::RandomValues(6, 72);
  double want = 0;
  for (int i = 0; i < 6; ++i) want += (a[i] - b[i]) * double(a[i] - b[i]) / 6;
  auto loss =
      mse_loss(MakeTensor(device_, a, {2, 3}), MakeTensor(device_, b, {2, 3}));
  ASSERT_TRUE(loss.ok());
  EXPECT_NEAR(*loss->item(), want, 1e-6);
}

}  // namespace
}  // namespace mixrt::kernels
