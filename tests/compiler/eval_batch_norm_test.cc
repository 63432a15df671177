// An inference graph's eval batch_norm, lowered by the compiler to a
// per-channel scale and shift that the CPU plugin fuses with the relu after
// it (core/compiler/eval_batch_norm.h): compiled results against eager's,
// in f32 and under bf16 autocast, and the statistics read when they change
// between calls (the scale and shift are kept launches on constants) while
// no call writes them.
#include <cmath>
#include <cstdlib>
#include <limits>
#include <vector>

#include "absl/status/statusor.h"
#include "core/amp/autocast/autocast.h"
#include "core/autograd/grad_mode.h"
#include "core/compiler/compile.h"
#include "core/functional/ops.h"
#include "core/kernels/fill_copy.h"
#include "core/kernels/pointwise.h"
#include "core/tensor/factories.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "mixrt/status_macros.h"
#include "tests/testing/test_plugins.h"

namespace mixrt {
namespace {

using ::testing::HasSubstr;

// conv 3x3 -> batch_norm (eval) -> relu, over 6 channels, then a 2x2 max
// pool when `pool`.
struct ConvBnRelu {
  Tensor w, gamma, beta, mean, var;
  bool pool = false;
  explicit ConvBnRelu(const Device& d) {
    Generator g(7);
    w = *randn({6, 4, 3, 3}, DType::kF32, d, 0, 0.5, &g);
    gamma = *randn({6}, DType::kF32, d, 1, 0.3, &g);
    beta = *randn({6}, DType::kF32, d, 0, 0.5, &g);
    mean = *randn({6}, DType::kF32, d, 0, 0.5, &g);
    var = *rand({6}, DType::kF32, d, 0.5, 2.0, &g);
  }
  absl::StatusOr<std::vector<Tensor>> operator()(
      const std::vector<Tensor>& in) const {
    MIXRT_ASSIGN_OR_RETURN(Tensor h,
                           conv2d(in[0], w, Tensor(), {.padding = 1}));
    MIXRT_ASSIGN_OR_RETURN(
        h, batch_norm(h, gamma, beta, mean, var, /*training=*/false));
    MIXRT_ASSIGN_OR_RETURN(h, relu(h));
    if (pool) {
      MIXRT_ASSIGN_OR_RETURN(h, pool2d(h, {}));
    }
    return std::vector<Tensor>{h};
  }
};

// Each compiled element against eager's. The CPU plugin folds the scale
// into the conv's weights and the shift into its bias, so the compiled
// form computes sum(x w scale) + shift where eager computes
// (sum(x w) - mean) * rstd * gamma + beta: a few f32 roundings of terms up
// to `terms` scale + |mean scale| + |beta|, where `terms` is sum |x| |w|
// (conv2d(|x|, |w|)). Under bf16 autocast, eager rounds the conv to bf16
// and the result again, and the folded weights are rounded to bf16 each
// (2^-8 relative at most, three times).
void ExpectClose(const Tensor& got, const Tensor& want, const Tensor& terms,
                 const ConvBnRelu& m, bool bf16) {
  const std::vector<float> g = *got.to_float_vector(),
                           e = *want.to_float_vector();
  const std::vector<float> c = *terms.to_float_vector();
  const std::vector<float> gamma = *m.gamma.to_float_vector(),
                           beta = *m.beta.to_float_vector(),
                           mean = *m.mean.to_float_vector(),
                           var = *m.var.to_float_vector();
  ASSERT_EQ(g.size(), e.size());
  const int64_t plane = static_cast<int64_t>(g.size()) / (2 * 6);
  for (size_t i = 0; i < g.size(); ++i) {
    const int ch = static_cast<int>((i / plane) % 6);
    const double scale = std::fabs(gamma[ch]) / std::sqrt(var[ch] + 1e-5);
    const double magnitude = std::fabs(c[i]) * scale +
                             std::fabs(mean[ch]) * scale + std::fabs(beta[ch]);
    const double tolerance = magnitude * (8 * std::ldexp(1.0, -24) +
                                          (bf16 ? 3 * std::ldexp(1.0, -8) : 0));
    ASSERT_NEAR(g[i], e[i], tolerance) << "element " << i;
  }
}

// sum |x| |w| per output element, in f32 (exact enough for a tolerance).
Tensor AbsoluteTerms(const Tensor& x, const Tensor& w) {
  return *conv2d(*kernels::abs(x), *kernels::abs(w), Tensor(), {.padding = 1});
}

TEST(EvalBatchNorm, LoweredAndFusedWithTheReluWithinTheDtypeOfEager) {
  const Device d = testing::CpuDevice();
  setenv("MIXRT_CPU_CODEGEN", "sync", 1);
  setenv("MIXRT_CACHE_DIR", ::testing::TempDir().c_str(), 1);
  const ConvBnRelu m(d);
  Generator g(8);
  const Tensor x = *randn({2, 4, 9, 11}, DType::kF32, d, 0, 1, &g);
  for (bool bf16 : {false, true}) {
    SCOPED_TRACE(bf16 ? "bf16 autocast" : "f32");
    InferenceModeGuard inference;
    std::optional<AutocastGuard> autocast;
    if (bf16) autocast.emplace("cpu", DType::kBF16);
    auto f = compile(m, {.mode = "reduce-overhead"});
    ASSERT_TRUE(f.ok()) << f.status();
    const std::vector<float> mean_before = *m.mean.to_float_vector();
    for (int call = 0; call < 3; ++call) {
      auto got = (*f)({x});
      ASSERT_TRUE(got.ok()) << got.status();
      auto want = m({x});
      ASSERT_TRUE(want.ok());
      ExpectClose((*got)[0], (*want)[0], AbsoluteTerms(x, m.w), m, bf16);
    }
    EXPECT_EQ(*m.mean.to_float_vector(), mean_before)
        << "a call wrote the statistics";
    const std::string explain = f->Explain();
    EXPECT_THAT(explain,
                HasSubstr("(1 eval batch_norms as a scale and shift)"));
    // Fused where the conv runs natively in its dtype; bf16 conv is
    // emulated on CPUs without avx512_bf16 or AMX, and stays op by op
    // there (the lowered scale and shift still replace the batch_norm).
    if (!bf16 || testing::CpuRunsNatively(MIXRT_OP_CLASS_CONV, DType::kBF16)) {
      EXPECT_THAT(
          explain,
          HasSubstr("oneDNN conv2d (weights packed per version) + binary_mul, "
                    "binary_add folded into weights and bias + post-ops relu "
                    "(guarded)"));
    } else {
      EXPECT_THAT(explain, ::testing::Not(HasSubstr("oneDNN conv2d")));
    }
    EXPECT_THAT(explain, ::testing::Not(HasSubstr("= batch_norm(")));
  }
}

TEST(EvalBatchNorm, NewStatisticsBetweenCallsAreRead) {
  const Device d = testing::CpuDevice();
  const ConvBnRelu m(d);
  Generator g(9);
  const Tensor x = *randn({2, 4, 9, 11}, DType::kF32, d, 0, 1, &g);
  InferenceModeGuard inference;
  auto f = compile(m);
  ASSERT_TRUE(f.ok());
  ASSERT_TRUE((*f)({x}).ok());
  // As load_state_dict would: new running statistics, in place.
  ASSERT_TRUE(kernels::copy_(m.var, *full({6}, 4.0, DType::kF32, d)).ok());
  ASSERT_TRUE(kernels::copy_(m.mean, *full({6}, -1.0, DType::kF32, d)).ok());
  auto got = (*f)({x});
  ASSERT_TRUE(got.ok());
  auto want = m({x});
  ASSERT_TRUE(want.ok());
  ExpectClose((*got)[0], (*want)[0], AbsoluteTerms(x, m.w), m, false);
  // New weights in place: the plugin's packed and folded copy is remade.
  ASSERT_TRUE(
      kernels::copy_(m.w, *randn({6, 4, 3, 3}, DType::kF32, d, 0, 0.5, &g))
          .ok());
  got = (*f)({x});
  ASSERT_TRUE(got.ok());
  want = m({x});
  ASSERT_TRUE(want.ok());
  ExpectClose((*got)[0], (*want)[0], AbsoluteTerms(x, m.w), m, false);
  EXPECT_EQ(f->compiles(), 1);
}

// Each element NaN exactly where eager's is; where eager's is +inf, the
// compiled one +inf or past 1e38 (see the test below); and at least one
// such element.
void ExpectSpecialsAsEager(const Tensor& got, const Tensor& want) {
  const std::vector<float> a = *got.to_float_vector(),
                           b = *want.to_float_vector();
  int specials = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::isnan(a[i])) {
      EXPECT_TRUE(std::isnan(b[i])) << "element " << i;
    }
    if (std::isfinite(b[i])) continue;
    ++specials;
    if (std::isnan(b[i])) {
      EXPECT_TRUE(std::isnan(a[i])) << "element " << i << ": " << a[i];
    } else {
      EXPECT_GT(a[i], 1e38f) << "element " << i << ", eager's " << b[i];
    }
  }
  EXPECT_GT(specials, 0) << "the case made no NaN or infinity";
}

// NaN and infinities in x, and finite values whose products overflow: the
// fused relu and max pool may not turn the NaN they make into 0 or drop it
// (oneDNN's relu post-op and max pool would), so each element is NaN
// exactly where eager's is. Where eager's is +inf,
// the compiled one is +inf or past 1e38: the lowered x * scale + shift
// overflows at other magnitudes than eager's (x - mean) * rstd * w + b.
TEST(EvalBatchNorm, NaNAndOverflowReachTheResultAsInEager) {
  const Device d = testing::CpuDevice();
  ConvBnRelu m(d);
  Generator g(10);
  std::vector<float> values =
      *randn({2, 4, 9, 11}, DType::kF32, d, 0, 1, &g)->to_float_vector();
  values[5] = std::nanf("");
  values[300] = std::numeric_limits<float>::infinity();
  std::vector<float> huge = values;
  huge[5] = 3e38f;
  huge[300] = -3e38f;
  huge[301] = 3e38f;
  for (const auto& [v, pool] : std::vector<std::pair<std::vector<float>, bool>>{
           {values, false}, {huge, false}, {values, true}, {huge, true}}) {
    SCOPED_TRACE(pool ? "with a max pool" : "without a pool");
    m.pool = pool;
    const Tensor x = *from_floats(v, {2, 4, 9, 11}, DType::kF32, d);
    InferenceModeGuard inference;
    auto f = compile(m);
    ASSERT_TRUE(f.ok());
    ASSERT_TRUE((*f)({x}).ok());
    auto got = (*f)({x});
    ASSERT_TRUE(got.ok()) << got.status();
    auto want = m({x});
    ASSERT_TRUE(want.ok());
    ExpectSpecialsAsEager((*got)[0], (*want)[0]);
  }
}

// Weights made huge in place after the kernel has run on finite ones: the
// bound reads the new version's magnitude, so the NaN the products now
// make reaches the result as in eager.
TEST(EvalBatchNorm, WeightsChangedToOverflowReachTheResultAsInEager) {
  const Device d = testing::CpuDevice();
  ConvBnRelu m(d);
  Generator g(14);
  const Tensor x = *randn({2, 4, 9, 11}, DType::kF32, d, 0, 1, &g);
  InferenceModeGuard inference;
  auto f = compile(m);
  ASSERT_TRUE(f.ok());
  for (int call = 0; call < 3; ++call) ASSERT_TRUE((*f)({x}).ok());
  std::vector<float> w = *m.w.to_float_vector();
  for (size_t i = 0; i < w.size(); i += 3) w[i] = i % 2 == 0 ? 3e38f : -3e38f;
  ASSERT_TRUE(
      kernels::copy_(m.w, *from_floats(w, {6, 4, 3, 3}, DType::kF32, d)).ok());
  auto got = (*f)({x});
  ASSERT_TRUE(got.ok()) << got.status();
  auto want = m({x});
  ASSERT_TRUE(want.ok());
  ExpectSpecialsAsEager((*got)[0], (*want)[0]);
}

}  // namespace
}  // namespace mixrt
