// batch_norm, embedding, dropout and the regression losses on the reference
// plugin against host formulas and finite differences.
#include <cmath>
#include <limits>
#include <vector>

#include "absl/status/statusor.h"
#include "core/kernels/batch_norm.h"
#include "core/kernels/dropout.h"
#include "core/kernels/embedding.h"
#include "core/kernels/loss.h"
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

class MoreOpsTest : public ::testing::Test {
 protected:
  void SetUp() override { device_ = testing::ReferenceDevice(); }
  Device device_;
};

TEST_F(MoreOpsTest, BatchNormTrainingUpdatesRunningStatistics) {
  const int n = 4, c = 2, s = 3;
  const std::vector<float> x = testing::RandomValues(n * c * s, 21);
  Tensor rm = MakeTensor(device_, {0, 1}, {c});
  Tensor rv = MakeTensor(device_, {1, 2}, {c});
  Tensor w = MakeTensor(device_, {2, 0.5}, {c});
  Tensor b = MakeTensor(device_, {0.1f, -0.2f}, {c});
  auto out = batch_norm(MakeTensor(device_, x, {n, c, s}), w, b, rm, rv, true,
                        0.1, 1e-5);
  ASSERT_TRUE(out.ok()) << out.status();
  std::vector<double> want(n * c * s), want_rm, want_rv;
  const double old_rm[] = {0, 1}, old_rv[] = {1, 2}, ws[] = {2, 0.5},
               bs[] = {0.1f, -0.2f};
  for (int ch = 0; ch < c; ++ch) {
    double m = 0, v = 0;
    for (int i = 0; i < n; ++i)
      for (int k = 0; k < s; ++k) m += x[(i * c + ch) * s + k] / double(n * s);
    for (int i = 0; i < n; ++i)
      for (int k = 0; k < s; ++k) v += std::pow(x[(i * c + ch) * s + k] - m, 2);
    want_rm.push_back(0.9 * old_rm[ch] + 0.1 * m);
    want_rv.push_back(0.9 * old_rv[ch] + 0.1 * v / (n * s - 1));  // Unbiased.
    for (int i = 0; i < n; ++i)
      for (int k = 0; k < s; ++k) {
        const int at = (i * c + ch) * s + k;
        want[at] =
            (x[at] - m) / std::sqrt(v / (n * s) + 1e-5) * ws[ch] + bs[ch];
      }
  }
  ExpectClose(Values(out->y), want, 1e-5, 1e-6, "y");
  ExpectClose(Values(rm), want_rm, 1e-6, 1e-7, "running_mean");
  ExpectClose(Values(rv), want_rv, 1e-6, 1e-7, "running_var");
  // Eval mode uses the running statistics and leaves them alone.
  auto eval =
      batch_norm(MakeTensor(device_, x, {n, c, s}), w, b, rm, rv, false);
  ASSERT_TRUE(eval.ok());
  ExpectClose(Values(rm), want_rm, 1e-6, 1e-7, "running_mean after eval");
  EXPECT_NEAR(Values(eval->y)[0],
              (x[0] - want_rm[0]) / std::sqrt(want_rv[0] + 1e-5) * 2 + 0.1,
              1e-5);
}

TEST_F(MoreOpsTest, BatchNormBackwardMatchesFiniteDifferences) {
  const std::vector<int64_t> shape = {3, 2, 2};
  const std::vector<float> x = testing::RandomValues(12, 31);
  const std::vector<float> up = testing::RandomValues(12, 32);
  Tensor w = MakeTensor(device_, {1.5, -0.5}, {2});
  Tensor b = MakeTensor(device_, {0, 0}, {2});
  auto objective = [&](const std::vector<double>& v) {
    std::vector<float> f(v.begin(), v.end());
    Tensor rm = MakeTensor(device_, {0, 0}, {2}),
           rv = MakeTensor(device_, {1, 1}, {2});
    auto out = batch_norm(MakeTensor(device_, f, shape), w, b, rm, rv, true);
    const std::vector<double> y = Values(out->y);
    double s = 0;
    for (size_t i = 0; i < y.size(); ++i) s += up[i] * y[i];
    return s;
  };
  Tensor rm = MakeTensor(device_, {0, 0}, {2}),
         rv = MakeTensor(device_, {1, 1}, {2});
  Tensor xt = MakeTensor(device_, x, shape);
  auto fwd = batch_norm(xt, w, b, rm, rv, true);
  ASSERT_TRUE(fwd.ok());
  auto g =
      batch_norm_backward(MakeTensor(device_, up, shape), xt, w, *fwd, true);
  ASSERT_TRUE(g.ok()) << g.status();
  ExpectClose(Values(g->grad_x),
              testing::NumericalGradient(objective, {x.begin(), x.end()}, 1e-2),
              5e-3, 5e-3, "grad_x");
  std::vector<double> gb(2, 0.0);
  for (int i = 0; i < 12; ++i) gb[(i / 2) % 2] += up[i];
  ExpectClose(Values(g->grad_bias), gb, 1e-6, 1e-6, "grad_bias");
}

TEST_F(MoreOpsTest, EmbeddingGathersAndScatterAdds) {
  Tensor table = MakeTensor(device_, {0, 1, 10, 11, 20, 21}, {3, 2});
  auto idx = from_ints({2, 0, 2, 1}, {2, 2}, DType::kI64, device_);
  ASSERT_TRUE(idx.ok());
  auto rows = embedding(table, *idx);
  ASSERT_TRUE(rows.ok());
  EXPECT_THAT(rows->shape(), ElementsAre(2, 2, 2));
  EXPECT_THAT(Values(rows), ElementsAre(20, 21, 0, 1, 20, 21, 10, 11));
  Tensor g = MakeTensor(device_, {1, 2, 3, 4, 5, 6, 7, 8}, {2, 2, 2});
  EXPECT_THAT(Values(embedding_backward(g, *idx, 3)),
              ElementsAre(3, 4, 7, 8, 6, 8));
  EXPECT_THAT(Values(embedding_backward(g, *idx, 3, /*padding_idx=*/2)),
              ElementsAre(3, 4, 7, 8, 0, 0));
  auto bad = from_ints({3}, {1}, DType::kI64, device_);
  EXPECT_THAT(embedding(table, *bad).status().message(),
              HasSubstr("index 3 at position 0 is out of range [0, 3)"));
}

TEST_F(MoreOpsTest, DropoutKeepsTheRightFractionAndScales) {
  auto x = full({100000}, 1.0, DType::kF32, device_);
  Generator g(1);
  auto out = dropout(*x, 0.25, &g);
  ASSERT_TRUE(out.ok());
  const std::vector<double> y = Values(out->y);
  int kept = 0;
  for (double v : y) {
    ASSERT_TRUE(v == 0 || std::fabs(v - 1 / 0.75) < 1e-6) << v;
    kept += v != 0;
  }
  // Binomial(1e5, 0.75): standard deviation 137; 5 of them.
  EXPECT_NEAR(kept, 75000, 700);
  // With an upstream gradient of ones, backward returns the mask scale,
  // which is exactly the output for an input of ones.
  EXPECT_EQ(Values(dropout_backward(*x, out->state)), y);
  EXPECT_THAT(dropout(*x, 1.5).status().message(), HasSubstr("[0, 1]"));
}

// p = 1 as PyTorch: x * 0 (NaN and inf give NaN, a negative -0; values
// checked against PyTorch 2.15 by hand), gradients 0, no draw from the
// generator.
TEST_F(MoreOpsTest, DropoutOfOneMultipliesByZero) {
  const double inf = std::numeric_limits<double>::infinity();
  Tensor x =
      MakeTensor(device_, {std::nanf(""), static_cast<float>(inf), 1, -2}, {4});
  Generator g(1);
  const uint64_t offset = g.offset();
  auto out = dropout(x, 1.0, &g);
  ASSERT_TRUE(out.ok()) << out.status();
  const std::vector<double> y = Values(out->y);
  EXPECT_TRUE(std::isnan(y[0]) && std::isnan(y[1])) << y[0] << " " << y[1];
  EXPECT_EQ(y[2], 0.0);
  EXPECT_TRUE(y[3] == 0.0 && std::signbit(y[3])) << y[3];
  EXPECT_EQ(g.offset(), offset);
  Tensor ones = MakeTensor(device_, {1, 1, 1, 1}, {4});
  EXPECT_THAT(Values(dropout_backward(ones, out->state)),
              ElementsAre(0.0, 0.0, 0.0, 0.0));
}

TEST_F(MoreOpsTest, RegressionLossesAndGradientsMatchDefinitions) {
  const std::vector<float> a = testing::RandomValues(6, 41, 2.0);
  const std::vector<float> t = testing::RandomValues(6, 42);
  Tensor at = MakeTensor(device_, a, {2, 3}),
         tt = MakeTensor(device_, t, {2, 3});
  Tensor one = MakeTensor(device_, {1}, {});
  struct L {
    const char* name;
    double (*host)(double, double);
    absl::StatusOr<Tensor> (*loss)(const Tensor&, const Tensor&, Reduction);
    absl::StatusOr<Tensor> (*grad)(const Tensor&, const Tensor&, const Tensor&,
                                   Reduction);
  };
  const L losses[] = {
      {"mse", [](double x, double y) { return (x - y) * (x - y); }, mse_loss,
       mse_loss_backward},
      {"l1", [](double x, double y) { return std::fabs(x - y); }, l1_loss,
       l1_loss_backward},
      {"bce_with_logits",
       [](double x, double y) {
         const double s = 1 / (1 + std::exp(-x));
         return -(y * std::log(s) + (1 - y) * std::log(1 - s));
       },
       binary_cross_entropy_with_logits,
       binary_cross_entropy_with_logits_backward},
  };
  for (const L& l : losses) {
    double want = 0;
    for (int i = 0; i < 6; ++i) want += l.host(a[i], t[i]) / 6;
    EXPECT_NEAR(Values(l.loss(at, tt, Reduction::kMean))[0], want, 1e-5)
        << l.name;
    const std::vector<double> numeric = testing::NumericalGradient(
        [&](const std::vector<double>& v) {
          double s = 0;
          for (int i = 0; i < 6; ++i) s += l.host(v[i], t[i]) / 6;
          return s;
        },
        {a.begin(), a.end()}, 1e-5);
    ExpectClose(Values(l.grad(one, at, tt, Reduction::kMean)), numeric, 1e-4,
                1e-6, l.name);
  }
  // smooth_l1 with beta 1: quadratic inside, linear outside.
  Tensor d = MakeTensor(device_, {0.5, 2, -3}, {3});
  Tensor z = MakeTensor(device_, {0, 0, 0}, {3});
  EXPECT_THAT(Values(smooth_l1_loss(d, z, Reduction::kNone)),
              ElementsAre(0.125, 1.5, 2.5));
  EXPECT_THAT(Values(smooth_l1_loss_backward(
                  MakeTensor(device_, {1, 1, 1}, {3}), d, z, Reduction::kNone)),
              ElementsAre(0.5, 1, -1));
}

}  // namespace
}  // namespace mixrt::kernels
