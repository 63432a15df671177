// conv2d and pool2d on the reference plugin: forward against a direct host
// loop written here, backward kernels against finite differences.
#include <cmath>
#include <vector>

#include "core/kernels/conv2d.h"
#include "core/kernels/pool2d.h"
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

class ConvPoolTest : public ::testing::Test {
 protected:
  void SetUp() override { device_ = testing::ReferenceDevice(); }
  Device device_;
};

TEST_F(ConvPoolTest, Conv2dMatchesADirectLoop) {
  const int n = 2, c = 4, h = 7, w = 6, o = 6, k = 3, groups = 2;
  Conv2dOptions opt;
  opt.stride = {2, 1};
  opt.padding = {1, 2};
  opt.dilation = {1, 2};
  opt.groups = groups;
  const std::vector<float> x = testing::RandomValues(n * c * h * w, 1);
  const std::vector<float> wt =
      testing::RandomValues(o * (c / groups) * k * k, 2);
  const std::vector<float> b = testing::RandomValues(o, 3);
  auto y = conv2d(MakeTensor(device_, x, {n, c, h, w}),
                  MakeTensor(device_, wt, {o, c / groups, k, k}),
                  MakeTensor(device_, b, {o}), opt);
  ASSERT_TRUE(y.ok()) << y.status();
  const int64_t ho = (h + 2 * 1 - 1 * (k - 1) - 1) / 2 + 1;
  const int64_t wo = (w + 2 * 2 - 2 * (k - 1) - 1) / 1 + 1;
  EXPECT_THAT(y->shape(), ElementsAre(n, o, ho, wo));
  std::vector<double> want;
  for (int b0 = 0; b0 < n; ++b0)
    for (int oc = 0; oc < o; ++oc)
      for (int64_t oy = 0; oy < ho; ++oy)
        for (int64_t ox = 0; ox < wo; ++ox) {
          double s = b[oc];
          const int g = oc / (o / groups);
          for (int ic = 0; ic < c / groups; ++ic)
            for (int i = 0; i < k; ++i)
              for (int j = 0; j < k; ++j) {
                const int64_t r = oy * 2 - 1 + i;
                const int64_t col = ox - 2 + 2 * j;
                if (r < 0 || r >= h || col < 0 || col >= w) continue;
                s += x[((b0 * c + g * (c / groups) + ic) * h + r) * w + col] *
                     double(wt[((oc * (c / groups) + ic) * k + i) * k + j]);
              }
          want.push_back(s);
        }
  ExpectClose(Values(y), want, 1e-6, 1e-6, "conv2d");
  EXPECT_THAT(conv2d(MakeTensor(device_, x, {n, c, h, w}),
                     MakeTensor(device_, wt, {o, c / groups, k, k}), Tensor())
                  .status()
                  .message(),
              HasSubstr("do not fit groups=1"));
}

TEST_F(ConvPoolTest, Conv2dBackwardMatchesFiniteDifferences) {
  const std::vector<int64_t> xs = {1, 2, 5, 4}, ws = {3, 2, 2, 2};
  Conv2dOptions opt;
  opt.padding = {1, 0};
  const std::vector<float> x = testing::RandomValues(40, 11);
  const std::vector<float> wt = testing::RandomValues(24, 12);
  Tensor xt = MakeTensor(device_, x, xs), wtt = MakeTensor(device_, wt, ws);
  auto y = conv2d(xt, wtt, Tensor(), opt);
  ASSERT_TRUE(y.ok());
  const std::vector<float> up = testing::RandomValues(y->numel(), 13);
  Tensor g = MakeTensor(device_, up, {y->shape().begin(), y->shape().end()});
  auto objective = [&](const std::vector<double>& xv,
                       const std::vector<double>& wv) {
    std::vector<float> xf(xv.begin(), xv.end()), wf(wv.begin(), wv.end());
    const std::vector<double> out =
        Values(conv2d(MakeTensor(device_, xf, xs), MakeTensor(device_, wf, ws),
                      Tensor(), opt));
    double s = 0;
    for (size_t i = 0; i < out.size(); ++i) s += up[i] * out[i];
    return s;
  };
  const std::vector<double> xd(x.begin(), x.end()), wd(wt.begin(), wt.end());
  ExpectClose(
      Values(conv2d_backward_data(g, wtt, xs, opt)),
      testing::NumericalGradient(
          [&](const std::vector<double>& v) { return objective(v, wd); }, xd,
          1e-2),
      2e-3, 2e-3, "grad_x");
  auto gw = conv2d_backward_weights(g, xt, ws, /*with_bias=*/true, opt);
  ASSERT_TRUE(gw.ok()) << gw.status();
  ExpectClose(
      Values(gw->grad_weight),
      testing::NumericalGradient(
          [&](const std::vector<double>& v) { return objective(xd, v); }, wd,
          1e-2),
      2e-3, 2e-3, "grad_w");
  std::vector<double> gb(3, 0.0);
  for (size_t i = 0; i < up.size(); ++i)
    gb[(i / (y->numel() / 3)) % 3] += up[i];
  ExpectClose(Values(gw->grad_bias), gb, 1e-6, 1e-6, "grad_b");
}

TEST_F(ConvPoolTest, PoolingForwardAndBackward) {
  // One 4x4 plane, 2x2 windows, stride 2.
  Tensor x =
      MakeTensor(device_, {1, 5, 2, 0, 3, 4, 8, 1, 0, 0, 1, 1, -1, -2, 1, 9},
                 {1, 1, 4, 4});
  Pool2dOptions max_opt;
  Pool2dOptions avg_opt;
  avg_opt.kind = MIXRT_POOL_AVG;
  EXPECT_THAT(Values(pool2d(x, max_opt)), ElementsAre(5, 8, 0, 9));
  EXPECT_THAT(Values(pool2d(x, avg_opt)), ElementsAre(3.25, 2.75, -0.75, 3));
  Tensor g = MakeTensor(device_, {1, 2, 3, 4}, {1, 1, 2, 2});
  // Max routes each gradient to its window's (first) maximum.
  EXPECT_THAT(Values(pool2d_backward(g, x, max_opt)),
              ElementsAre(0, 1, 0, 0, 0, 0, 2, 0, 3, 3 * 0, 0, 0, 0, 0, 0, 4));
  EXPECT_THAT(Values(pool2d_backward(g, x, avg_opt)),
              ElementsAre(.25, .25, .5, .5, .25, .25, .5, .5, .75, .75, 1, 1,
                          .75, .75, 1, 1));
  // Padding counts in the average's divisor (PyTorch's default).
  Pool2dOptions padded = avg_opt;
  padded.kernel = {3, 3};
  padded.stride = {1, 1};
  padded.padding = {1, 1};
  EXPECT_NEAR(Values(pool2d(x, padded))[0], (1 + 5 + 3 + 4) / 9.0, 1e-6);
  EXPECT_THAT(pool2d(x, Pool2dOptions{MIXRT_POOL_MAX, {2, 2}, {2, 2}, {2, 2}})
                  .status()
                  .message(),
              HasSubstr("padding <= kernel / 2"));
}

}  // namespace
}  // namespace mixrt::kernels
