// softmax, log_softmax and layer_norm against host formulas; their backward
// kernels against finite differences of the forward kernels.
#include <cmath>
#include <functional>
#include <vector>

#include "absl/status/statusor.h"
#include "core/kernels/layer_norm.h"
#include "core/kernels/softmax.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/op_test_util.h"
#include "tests/testing/test_plugins.h"

namespace mixrt::kernels {
namespace {

using testing::ExpectClose;
using testing::MakeTensor;
using testing::Values;

class SoftmaxNormTest : public ::testing::Test {
 protected:
  void SetUp() override { device_ = testing::ReferenceDevice(); }

  // sum(w * f(x)) through a device forward op, as a function of host x.
  std::function<double(const std::vector<double>&)> Objective(
      std::function<absl::StatusOr<Tensor>(const Tensor&)> forward,
      std::vector<int64_t> shape, const std::vector<float>& w) {
    return [=](const std::vector<double>& x) {
      std::vector<float> xf(x.begin(), x.end());
      const std::vector<double> y =
          Values(forward(MakeTensor(device_, xf, shape)));
      double s = 0;
      for (size_t i = 0; i < y.size(); ++i) s += w[i] * y[i];
      return s;
    };
  }

  Device device_;
};

TEST_F(SoftmaxNormTest, SoftmaxAlongEachDim) {
  const std::vector<float> data = testing::RandomValues(3 * 4, 21, 3.0);
  Tensor x = MakeTensor(device_, data, {3, 4});
  for (int dim : {0, 1, -1}) {
    const int axis = dim < 0 ? dim + 2 : dim;
    std::vector<double> want(12), want_log(12);
    for (int outer = 0; outer < (axis == 0 ? 4 : 3); ++outer) {
      const int n = axis == 0 ? 3 : 4;
      auto at = [&](int i) {
        return axis == 0 ? i * 4 + outer : outer * 4 + i;
      };
      double mx = -INFINITY, s = 0;
      for (int i = 0; i < n; ++i) mx = std::max(mx, double(data[at(i)]));
      for (int i = 0; i < n; ++i) s += std::exp(data[at(i)] - mx);
      for (int i = 0; i < n; ++i) {
        want[at(i)] = std::exp(data[at(i)] - mx) / s;
        want_log[at(i)] = data[at(i)] - mx - std::log(s);
      }
    }
    ExpectClose(Values(softmax(x, dim)), want, 1e-6, 1e-7, "softmax");
    ExpectClose(Values(log_softmax(x, dim)), want_log, 1e-6, 1e-6,
                "log_softmax");
  }
  // Large logits do not overflow (max is subtracted first).
  Tensor big = MakeTensor(device_, {1000, 1000}, {2});
  ExpectClose(Values(softmax(big, 0)), {0.5, 0.5}, 0, 0, "softmax large");
}

TEST_F(SoftmaxNormTest, SoftmaxBackwardsMatchFiniteDifferences) {
  const std::vector<int64_t> shape = {2, 5};
  const std::vector<float> x = testing::RandomValues(10, 31);
  const std::vector<float> w = testing::RandomValues(10, 32);
  Tensor xt = MakeTensor(device_, x, shape);
  Tensor wt = MakeTensor(device_, w, shape);
  for (bool log : {false, true}) {
    auto forward = [log](const Tensor& t) {
      return log ? log_softmax(t, 1) : softmax(t, 1);
    };
    auto y = forward(xt);
    ASSERT_TRUE(y.ok());
    const std::vector<double> analytic = Values(
        log ? log_softmax_backward(wt, *y, 1) : softmax_backward(wt, *y, 1));
    const std::vector<double> numeric = testing::NumericalGradient(
        Objective(forward, shape, w), std::vector<double>(x.begin(), x.end()),
        1e-2);
    ExpectClose(analytic, numeric, 5e-3, 5e-3,
                log ? "log_softmax_backward" : "softmax_backward");
  }
}

TEST_F(SoftmaxNormTest, LayerNormForwardMatchesHost) {
  const int rows = 4, cols = 6;
  const std::vector<float> x = testing::RandomValues(rows * cols, 41, 2.0);
  const std::vector<float> w = testing::RandomValues(cols, 42);
  const std::vector<float> b = testing::RandomValues(cols, 43);
  auto out = layer_norm(MakeTensor(device_, x, {2, 2, cols}), 1,
                        MakeTensor(device_, w, {cols}),
                        MakeTensor(device_, b, {cols}), 1e-5);
  ASSERT_TRUE(out.ok()) << out.status();
  std::vector<double> want, want_mean, want_rstd;
  for (int r = 0; r < rows; ++r) {
    double m = 0, v = 0;
    for (int c = 0; c < cols; ++c) m += x[r * cols + c] / double(cols);
    for (int c = 0; c < cols; ++c) v += std::pow(x[r * cols + c] - m, 2) / cols;
    const double rstd = 1 / std::sqrt(v + 1e-5);
    want_mean.push_back(m);
    want_rstd.push_back(rstd);
    for (int c = 0; c < cols; ++c) {
      want.push_back((x[r * cols + c] - m) * rstd * w[c] + b[c]);
    }
  }
  ExpectClose(Values(out->y), want, 1e-6, 1e-6, "layer_norm y");
  ExpectClose(Values(out->mean), want_mean, 1e-6, 1e-7, "layer_norm mean");
  ExpectClose(Values(out->rstd), want_rstd, 1e-6, 0, "layer_norm rstd");
  EXPECT_THAT(layer_norm(MakeTensor(device_, x, {rows, cols}), 1,
                         MakeTensor(device_, w, {cols}), Tensor())
                  .status()
                  .message(),
              ::testing::HasSubstr("both weight and bias"));
}

TEST_F(SoftmaxNormTest, LayerNormBackwardMatchesFiniteDifferences) {
  const int rows = 3, cols = 5;
  const std::vector<int64_t> shape = {rows, cols};
  const std::vector<float> x = testing::RandomValues(rows * cols, 51);
  const std::vector<float> w = testing::RandomValues(cols, 52);
  const std::vector<float> b = testing::RandomValues(cols, 53);
  const std::vector<float> up = testing::RandomValues(rows * cols, 54);
  Tensor wt = MakeTensor(device_, w, {cols});
  Tensor bt = MakeTensor(device_, b, {cols});
  Tensor xt = MakeTensor(device_, x, shape);
  auto fwd = layer_norm(xt, 1, wt, bt);
  ASSERT_TRUE(fwd.ok());
  auto grads =
      layer_norm_backward(MakeTensor(device_, up, shape), xt, *fwd, 1, wt);
  ASSERT_TRUE(grads.ok()) << grads.status();
  const double h = 1e-2;
  auto by_x = [&](const Tensor& t) -> absl::StatusOr<Tensor> {
    auto o = layer_norm(t, 1, wt, bt);
    if (!o.ok()) return o.status();
    return o->y;
  };
  ExpectClose(Values(grads->grad_x),
              testing::NumericalGradient(Objective(by_x, shape, up),
                                         {x.begin(), x.end()}, h),
              5e-3, 5e-3, "grad_x");
  // Weight and bias: differentiate through the parameter instead.
  auto objective_w = [&](const std::vector<double>& wv) {
    std::vector<float> wf(wv.begin(), wv.end());
    const std::vector<double> y =
        Values(layer_norm(xt, 1, MakeTensor(device_, wf, {cols}), bt)->y);
    double s = 0;
    for (size_t i = 0; i < y.size(); ++i) s += up[i] * y[i];
    return s;
  };
  ExpectClose(Values(grads->grad_weight),
              testing::NumericalGradient(objective_w, {w.begin(), w.end()}, h),
              5e-3, 5e-3, "grad_weight");
  std::vector<double> want_gb(cols, 0.0);
  for (int r = 0; r < rows; ++r)
    for (int c = 0; c < cols; ++c) want_gb[c] += up[r * cols + c];
  ExpectClose(Values(grads->grad_bias), want_gb, 1e-6, 1e-6, "grad_bias");
}

}  // namespace
}  // namespace mixrt::kernels
