// Helpers for op tests: host tensors in and out, closeness checks with
// dtype-derived tolerances, and central finite differences.
#ifndef MIXRT_TESTS_TESTING_OP_TEST_UTIL_H_
#define MIXRT_TESTS_TESTING_OP_TEST_UTIL_H_

#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/tensor/factories.h"
#include "gtest/gtest.h"

namespace mixrt::testing {

// Values of `t` as doubles; fails the test on error.
std::vector<double> Values(const absl::StatusOr<Tensor>& t);

Tensor MakeTensor(const Device& device, std::vector<float> values,
                  std::vector<int64_t> shape, DType dtype = DType::kF32);

// N(0, 1) values, deterministic per seed.
std::vector<float> RandomValues(int64_t n, uint64_t seed, double scale = 1.0);

// Relative tolerance for results stored in `dtype` after one rounding:
// a few units of roundoff (f32 2^-24, f16 2^-11, bf16 2^-8).
double RoundingTolerance(DType dtype);

// Expects |got - want| <= atol + rtol * |want| elementwise (NaN == NaN).
void ExpectClose(const std::vector<double>& got,
                 const std::vector<double>& want, double rtol, double atol,
                 const std::string& what);

// d f / d x_i by central differences with step h.
std::vector<double> NumericalGradient(
    const std::function<double(const std::vector<double>&)>& f,
    std::vector<double> x, double h);

}  // namespace mixrt::testing

#endif  // MIXRT_TESTS_TESTING_OP_TEST_UTIL_H_
