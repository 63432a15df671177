#include "tests/testing/op_test_util.h"

#include <cmath>

#include "absl/status/statusor.h"
#include "plugins/sdk/philox.h"

namespace mixrt::testing {

std::vector<double> Values(const absl::StatusOr<Tensor>& t) {
  EXPECT_TRUE(t.ok()) << t.status();
  if (!t.ok()) return {};
  absl::StatusOr<std::vector<double>> v = t->to_double_vector();
  EXPECT_TRUE(v.ok()) << v.status();
  return v.ok() ? *v : std::vector<double>{};
}

Tensor MakeTensor(const Device& device, std::vector<float> values,
                  std::vector<int64_t> shape, DType dtype) {
  absl::StatusOr<Tensor> t = from_floats(values, shape, dtype, device);
  EXPECT_TRUE(t.ok()) << t.status();
  return t.ok() ? *t : Tensor();
}

std::vector<float> RandomValues(int64_t n, uint64_t seed, double scale) {
  std::vector<float> v(n);
  for (int64_t i = 0; i < n; ++i) {
    v[i] = static_cast<float>(
        scale * sdk::PhiloxNormal(seed, 0, static_cast<uint64_t>(i), 0, 1));
  }
  return v;
}

double RoundingTolerance(DType dtype) {
  switch (dtype) {
    case DType::kF16:
      return 4 * std::ldexp(1.0, -11);
    case DType::kBF16:
      return 4 * std::ldexp(1.0, -8);
    default:
      return 4 * std::ldexp(1.0, -24);
  }
}

void ExpectClose(const std::vector<double>& got,
                 const std::vector<double>& want, double rtol, double atol,
                 const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  int reported = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    if (std::isnan(want[i]) && std::isnan(got[i])) continue;
    if (got[i] == want[i]) continue;  // Also equal infinities.
    const double err = std::fabs(got[i] - want[i]);
    if (!(err <= atol + rtol * std::fabs(want[i]))) {
      ADD_FAILURE() << what << "[" << i << "]: got " << got[i] << ", want "
                    << want[i] << " (error " << err << ", allowed "
                    << atol + rtol * std::fabs(want[i]) << ")";
      if (++reported == 5) return;
    }
  }
}

std::vector<double> NumericalGradient(
    const std::function<double(const std::vector<double>&)>& f,
    std::vector<double> x, double h) {
  std::vector<double> grad(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    const double saved = x[i];
    x[i] = saved + h;
    const double up = f(x);
    x[i] = saved - h;
    const double down = f(x);
    x[i] = saved;
    grad[i] = (up - down) / (2 * h);
  }
  return grad;
}

}  // namespace mixrt::testing
