// Pointwise ops on the reference plugin against <cmath> on the host, and
// every unary gradient against finite differences of the forward kernel.
#include "core/kernels/pointwise.h"

#include <cmath>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/op_test_util.h"
#include "tests/testing/test_plugins.h"

namespace mixrt::kernels {
namespace {

using testing::ExpectClose;
using testing::MakeTensor;
using testing::Values;

struct UnaryCase {
  MixrtUnaryKind kind;
  double (*host)(double);
  double alpha = 0, beta = 0;
  bool positive_only = false;
};

double HostGelu(double x) {
  return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0)));
}
double HostGeluTanh(double x) {
  return 0.5 * x *
         (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
}
double HostSigmoid(double x) { return 1 / (1 + std::exp(-x)); }

std::vector<UnaryCase> Cases() {
  return {
      {MIXRT_UNARY_NEG, [](double x) { return -x; }},
      {MIXRT_UNARY_ABS, [](double x) { return std::fabs(x); }},
      {MIXRT_UNARY_RELU, [](double x) { return x > 0 ? x : 0; }},
      {MIXRT_UNARY_LEAKY_RELU, [](double x) { return x > 0 ? x : 0.1 * x; },
       0.1},
      {MIXRT_UNARY_GELU, HostGelu},
      {MIXRT_UNARY_GELU_TANH, HostGeluTanh},
      {MIXRT_UNARY_SILU, [](double x) { return x * HostSigmoid(x); }},
      {MIXRT_UNARY_SIGMOID, HostSigmoid},
      {MIXRT_UNARY_TANH, [](double x) { return std::tanh(x); }},
      {MIXRT_UNARY_EXP, [](double x) { return std::exp(x); }},
      {MIXRT_UNARY_LOG, [](double x) { return std::log(x); }, 0, 0, true},
      {MIXRT_UNARY_LOG1P, [](double x) { return std::log1p(x); }, 0, 0, true},
      {MIXRT_UNARY_SQRT, [](double x) { return std::sqrt(x); }, 0, 0, true},
      {MIXRT_UNARY_RSQRT, [](double x) { return 1 / std::sqrt(x); }, 0, 0,
       true},
      {MIXRT_UNARY_CLAMP,
       [](double x) { return std::min(std::max(x, -0.5), 0.75); }, -0.5, 0.75},
      {MIXRT_UNARY_POW_SCALAR, [](double x) { return std::pow(x, 2.5); }, 2.5,
       0, true},
      {MIXRT_UNARY_SCALE, [](double x) { return 3 * x - 1; }, 3, -1},
  };
}

class PointwiseTest : public ::testing::Test {
 protected:
  void SetUp() override { device_ = testing::ReferenceDevice(); }

  // Points spread over [-3, 3] (or (0, 4]) that avoid kinks at 0 and the
  // clamp bounds by more than the finite-difference step.
  static std::vector<float> Points(bool positive_only) {
    std::vector<float> v;
    for (int i = 0; i < 48; ++i) {
      const double t = (i + 0.5) / 48.0;
      v.push_back(static_cast<float>(positive_only ? 0.05 + 4 * t
                                                   : -3 + 6 * t + 0.013));
    }
    return v;
  }

  Device device_;
};

TEST_F(PointwiseTest, UnaryMatchesHostMathInEveryFloatDtype) {
  for (const UnaryCase& c : Cases()) {
    const std::vector<float> x = Points(c.positive_only);
    for (DType dtype : {DType::kF32, DType::kF16, DType::kBF16}) {
      Tensor t = MakeTensor(device_, x, {6, 8}, dtype);
      const std::vector<double> in = Values(t);  // Rounded to dtype.
      std::vector<double> want;
      for (double v : in) want.push_back(c.host(v));
      // One rounding of the result on store.
      ExpectClose(Values(unary(c.kind, t, c.alpha, c.beta)), want,
                  testing::RoundingTolerance(dtype), 1e-30,
                  absl::StrCat("unary ", c.kind, " ", DTypeName(dtype)));
    }
  }
}

TEST_F(PointwiseTest, UnaryBackwardMatchesFiniteDifferences) {
  const std::vector<float> upstream = testing::RandomValues(48, 5);
  for (const UnaryCase& c : Cases()) {
    const std::vector<float> x = Points(c.positive_only);
    Tensor xt = MakeTensor(device_, x, {48});
    Tensor gt = MakeTensor(device_, upstream, {48});
    const std::vector<double> analytic =
        Values(unary_backward(c.kind, gt, xt, c.alpha, c.beta));
    // Elementwise op: d sum(w * f(x)) / d x_i = w_i f'(x_i); difference each
    // element on its own through the forward kernel.
    std::vector<double> numeric(48);
    // Small enough for rsqrt's curvature near 0.05, large enough that f32
    // roundoff / h stays near 1e-4.
    const double h = 1e-3;
    std::vector<float> up = x, down = x;
    for (int i = 0; i < 48; ++i) {
      up[i] += h;
      down[i] -= h;
    }
    const std::vector<double> fu =
        Values(unary(c.kind, MakeTensor(device_, up, {48}), c.alpha, c.beta));
    const std::vector<double> fd =
        Values(unary(c.kind, MakeTensor(device_, down, {48}), c.alpha, c.beta));
    for (int i = 0; i < 48; ++i) {
      const double step = static_cast<double>(up[i]) - down[i];
      numeric[i] = upstream[i] * (fu[i] - fd[i]) / step;
    }
    // Truncation error h^2 |f'''| / 6 plus f32 roundoff / h.
    ExpectClose(analytic, numeric, 5e-3, 5e-3,
                absl::StrCat("unary_backward ", c.kind));
  }
}

TEST_F(PointwiseTest, BinaryOpsBroadcastAndMatchHost) {
  const std::vector<float> a = testing::RandomValues(12, 1);
  std::vector<float> b = testing::RandomValues(4, 2);
  for (float& v : b) v = std::fabs(v) + 0.5f;  // Safe for pow and div.
  std::vector<float> pa = a;
  for (float& v : pa) v = std::fabs(v) + 0.1f;
  Tensor ta = MakeTensor(device_, a, {3, 4});
  Tensor tpa = MakeTensor(device_, pa, {3, 4});
  Tensor tb = MakeTensor(device_, b, {4});
  struct Case {
    MixrtBinaryKind kind;
    double (*host)(double, double);
    bool positive;
  };
  const Case cases[] = {
      {MIXRT_BINARY_ADD, [](double x, double y) { return x + y; }, false},
      {MIXRT_BINARY_SUB, [](double x, double y) { return x - y; }, false},
      {MIXRT_BINARY_MUL, [](double x, double y) { return x * y; }, false},
      {MIXRT_BINARY_DIV, [](double x, double y) { return x / y; }, false},
      {MIXRT_BINARY_POW, [](double x, double y) { return std::pow(x, y); },
       true},
      {MIXRT_BINARY_MAXIMUM, [](double x, double y) { return std::max(x, y); },
       false},
      {MIXRT_BINARY_MINIMUM, [](double x, double y) { return std::min(x, y); },
       false},
  };
  for (const Case& c : cases) {
    const std::vector<float>& lhs = c.positive ? pa : a;
    std::vector<double> want;
    for (int i = 0; i < 3; ++i)
      for (int j = 0; j < 4; ++j) want.push_back(c.host(lhs[i * 4 + j], b[j]));
    ExpectClose(Values(binary(c.kind, c.positive ? tpa : ta, tb)), want,
                testing::RoundingTolerance(DType::kF32), 0,
                absl::StrCat("binary ", c.kind));
  }
  // NaN propagates through maximum and minimum.
  Tensor n = MakeTensor(device_, {NAN, 1}, {2});
  Tensor one = MakeTensor(device_, {0, 2}, {2});
  EXPECT_TRUE(std::isnan(Values(maximum(n, one))[0]));
  EXPECT_EQ(Values(minimum(n, one))[1], 1.0);
}

TEST_F(PointwiseTest, ComparisonsAndWhere) {
  Tensor a = MakeTensor(device_, {1, 2, 3, NAN}, {4});
  Tensor b = MakeTensor(device_, {2}, {1});
  EXPECT_THAT(Values(lt(a, b)), ::testing::ElementsAre(1, 0, 0, 0));
  EXPECT_THAT(Values(le(a, b)), ::testing::ElementsAre(1, 1, 0, 0));
  EXPECT_THAT(Values(eq(a, b)), ::testing::ElementsAre(0, 1, 0, 0));
  EXPECT_THAT(Values(ne(a, b)), ::testing::ElementsAre(1, 0, 1, 1));
  EXPECT_THAT(Values(gt(a, b)), ::testing::ElementsAre(0, 0, 1, 0));
  EXPECT_THAT(Values(ge(a, b)), ::testing::ElementsAre(0, 1, 1, 0));
  auto cond = gt(a, b);
  ASSERT_TRUE(cond.ok());
  Tensor zero = MakeTensor(device_, {0}, {1}, DType::kF16);
  auto w = where(*cond, a, zero);  // f32 with f16 promotes to f32.
  ASSERT_TRUE(w.ok()) << w.status();
  EXPECT_EQ(w->dtype(), DType::kF32);
  EXPECT_THAT(Values(w), ::testing::ElementsAre(0, 0, 3, 0));
  EXPECT_THAT(where(a, a, a).status().message(),
              ::testing::HasSubstr("condition must be bool"));
}

TEST_F(PointwiseTest, ErrorsNameTheOp) {
  auto i = from_ints({1, 2}, {2}, DType::kI64, device_);
  ASSERT_TRUE(i.ok());
  EXPECT_THAT(exp(*i).status().message(),
              ::testing::HasSubstr("exp: expected a floating tensor"));
  EXPECT_THAT(clamp(MakeTensor(device_, {1}, {1}), 2, 1).status().message(),
              ::testing::HasSubstr("clamp: min 2 is greater than max 1"));
  EXPECT_THAT(Values(abs(*i)), ::testing::ElementsAre(1, 2));
}

}  // namespace
}  // namespace mixrt::kernels
