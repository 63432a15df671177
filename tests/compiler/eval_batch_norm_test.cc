// An inference graph's eval batch_norm, lowered by the compiler to a
// per-channel scale and shift that the CPU plugin fuses with the relu after
// it (core/compiler/eval_batch_norm.h): compiled results against eager's,
// in f32 and under bf16 autocast, and the statistics read when they change
// between calls (the scale and shift are kept launches on constants) while
// no call writes them.
#include <cmath>
#include <cstdlib>
#include <vector>

#include "core/amp/autocast.h"
#include "core/autograd/grad_mode.h"
#include "core/compiler/compile.h"
#include "core/functional/ops.h"
#include "core/kernels/fill_copy.h"
#include "core/tensor/factories.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "mixrt/status_macros.h"
#include "tests/testing/test_plugins.h"

namespace mixrt {
namespace {

using ::testing::HasSubstr;

// conv 3x3 -> batch_norm (eval) -> relu, over 6 channels.
struct ConvBnRelu {
  Tensor w, gamma, beta, mean, var;
  explicit ConvBnRelu(const Device& d) {
    Generator g(7);
    w = *randn({6, 4, 3, 3}, DType::kF32, d, 0, 0.5, &g);
    gamma = *randn({6}, DType::kF32, d, 1, 0.3, &g);
    beta = *randn({6}, DType::kF32, d, 0, 0.5, &g);
    mean = *randn({6}, DType::kF32, d, 0, 0.5, &g);
    var = *rand({6}, DType::kF32, d, 0.5, 2.0, &g);
  }
  absl::StatusOr<std::vector<Tensor>> operator()(const std::vector<Tensor>& in) const {
    MIXRT_ASSIGN_OR_RETURN(Tensor h, conv2d(in[0], w, Tensor(), {.padding = 1}));
    MIXRT_ASSIGN_OR_RETURN(h, batch_norm(h, gamma, beta, mean, var, /*training=*/false));
    MIXRT_ASSIGN_OR_RETURN(h, relu(h));
    return std::vector<Tensor>{h};
  }
};

// Each compiled element against eager's: the lowered form computes
// x * scale + shift where eager computes (x - mean) * rstd * w + b, both
// in f32, a few f32 roundings of terms up to |x| |scale| + |mean scale| +
// |b|; with a bf16 result, one bf16 rounding (2^-8 relative) on top.
void ExpectClose(const Tensor& got, const Tensor& want, const Tensor& conv,
                 const ConvBnRelu& m, bool bf16) {
  const std::vector<float> g = *got.to_float_vector(), e = *want.to_float_vector();
  const std::vector<float> c = *conv.to_float_vector();
  const std::vector<float> gamma = *m.gamma.to_float_vector(), beta = *m.beta.to_float_vector(),
                           mean = *m.mean.to_float_vector(), var = *m.var.to_float_vector();
  ASSERT_EQ(g.size(), e.size());
  const int64_t plane = static_cast<int64_t>(g.size()) / (2 * 6);
  for (size_t i = 0; i < g.size(); ++i) {
    const int ch = static_cast<int>((i / plane) % 6);
    const double scale = std::fabs(gamma[ch]) / std::sqrt(var[ch] + 1e-5);
    const double magnitude =
        std::fabs(c[i]) * scale + std::fabs(mean[ch]) * scale + std::fabs(beta[ch]);
    const double tolerance =
        magnitude * (8 * std::ldexp(1.0, -24) + (bf16 ? 2 * std::ldexp(1.0, -8) : 0));
    ASSERT_NEAR(g[i], e[i], tolerance) << "element " << i;
  }
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
      Tensor conv = *conv2d(bf16 ? *x.to(DType::kBF16) : x,
                            bf16 ? *m.w.to(DType::kBF16) : m.w, Tensor(), {.padding = 1});
      ExpectClose((*got)[0], (*want)[0], conv, m, bf16);
    }
    EXPECT_EQ(*m.mean.to_float_vector(), mean_before) << "a call wrote the statistics";
    const std::string explain = f->Explain();
    EXPECT_THAT(explain, HasSubstr("(1 eval batch_norms as a scale and shift)"));
    EXPECT_THAT(explain, ::testing::ContainsRegex("fused loop: (copy, )?binary, binary, "
                                                  "(copy, )?unary \\(generated C\\+\\+\\)"));
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
  ExpectClose((*got)[0], (*want)[0], *conv2d(x, m.w, Tensor(), {.padding = 1}), m, false);
  EXPECT_EQ(f->compiles(), 1);
}

}  // namespace
}  // namespace mixrt
