// Kept weight casts released once the fused kernels reading them keep their
// own copies (keeps_copy in plugin_api.h): an autocast linear in inference
// mode on the CPU plugin, whose fused matmul packs the bf16 copy of the
// weight. The plan lets the copy go after the run that packed it, and when
// the weight changes in place (load_state_dict), computes it again so the
// kernel repacks: results match eager's before and after, node by node and
// in kernel graphs. Where bf16 matmul is emulated (CPUs without
// avx512_bf16 or AMX) nothing is fused or packed: the casts stay kept,
// none is released, and results still match eager's.
#include <cmath>
#include <optional>
#include <vector>

#include "absl/status/statusor.h"
#include "core/amp/autocast/autocast.h"
#include "core/autograd/grad_mode.h"
#include "core/compiler/compile.h"
#include "core/functional/ops.h"
#include "core/kernels/fill_copy.h"
#include "core/kernels/matmul.h"
#include "core/kernels/pointwise.h"
#include "core/tensor/factories.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "mixrt/status_macros.h"
#include "tests/testing/test_plugins.h"

namespace mixrt {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

// Compiled against eager, both bf16 products with f32 accumulation: one
// bf16 rounding of the result (2^-8 relative) and of each operand (2^-8
// each), of sum |x| |w| + |b| at most.
void ExpectClose(const Tensor& got, const Tensor& want, const Tensor& x,
                 const Tensor& w, const Tensor& b) {
  const Tensor bound =
      *kernels::linear(*kernels::abs(x), *kernels::abs(w), *kernels::abs(b));
  const std::vector<float> g = *got.to_float_vector(),
                           e = *want.to_float_vector(),
                           m = *bound.to_float_vector();
  ASSERT_EQ(g.size(), e.size());
  for (size_t i = 0; i < g.size(); ++i) {
    ASSERT_NEAR(g[i], e[i], 4 * std::ldexp(1.0, -8) * m[i]) << "element " << i;
  }
}

void ExpectReleasedWhereBf16IsNative(const std::string& explain) {
  if (testing::CpuRunsNatively(MIXRT_OP_CLASS_MATMUL, DType::kBF16)) {
    EXPECT_THAT(explain,
                HasSubstr("of them released: the fused kernels reading them "
                          "keep their own copies"));
    EXPECT_THAT(explain, HasSubstr("weights packed per version"));
  } else {
    EXPECT_THAT(explain, Not(HasSubstr("of them released")));
    EXPECT_THAT(explain, Not(HasSubstr("weights packed per version")));
  }
}

TEST(ReleasedWeightCopy,
     ReleasedAfterPackingAndRecomputedWhenTheWeightChanges) {
  const Device d = testing::CpuDevice();
  Generator g(11);
  const Tensor w = *randn({96, 64}, DType::kF32, d, 0, 0.2, &g);
  const Tensor b = *randn({96}, DType::kF32, d, 0, 0.2, &g);
  const Tensor x = *randn({48, 64}, DType::kF32, d, 0, 1, &g);
  const auto fn = [&](const std::vector<Tensor>& in)
      -> absl::StatusOr<std::vector<Tensor>> {
    MIXRT_ASSIGN_OR_RETURN(Tensor y, linear(in[0], w, b));
    return std::vector<Tensor>{y};
  };
  for (const char* mode : {"default", "reduce-overhead"}) {
    SCOPED_TRACE(mode);
    ASSERT_TRUE(
        kernels::copy_(w, *randn({96, 64}, DType::kF32, d, 0, 0.2, &g)).ok());
    InferenceModeGuard inference;
    AutocastGuard autocast("cpu", DType::kBF16);
    auto f = compile(fn, {.mode = mode});
    ASSERT_TRUE(f.ok()) << f.status();
    for (int call = 0; call < 3; ++call) {
      auto got = (*f)({x});
      ASSERT_TRUE(got.ok()) << got.status();
      ExpectClose((*got)[0], (*fn({x}))[0], x, w, b);
    }
    ExpectReleasedWhereBf16IsNative(f->Explain());
    // New weights in place: the bf16 copy is computed again and repacked.
    for (int update = 0; update < 2; ++update) {
      ASSERT_TRUE(
          kernels::copy_(w, *randn({96, 64}, DType::kF32, d, 0, 0.2, &g)).ok());
      for (int call = 0; call < 2; ++call) {
        auto got = (*f)({x});
        ASSERT_TRUE(got.ok()) << got.status();
        ExpectClose((*got)[0], (*fn({x}))[0], x, w, b);
      }
    }
    EXPECT_EQ(f->compiles(), 1);
  }
}

// The released cast computed from another kept result (a contiguous copy
// of the weight's transpose, transposed back): a change of the weight
// makes both due again, the second before the first has run.
TEST(ReleasedWeightCopy, ACastOfAKeptResultIsComputedAgainToo) {
  const Device d = testing::CpuDevice();
  Generator g(12);
  const Tensor w = *randn({96, 64}, DType::kF32, d, 0, 0.2, &g);
  const Tensor b = *randn({96}, DType::kF32, d, 0, 0.2, &g);
  const Tensor x = *randn({48, 64}, DType::kF32, d, 0, 1, &g);
  const auto fn = [&](const std::vector<Tensor>& in)
      -> absl::StatusOr<std::vector<Tensor>> {
    MIXRT_ASSIGN_OR_RETURN(Tensor wt, transpose(w, 0, 1));
    MIXRT_ASSIGN_OR_RETURN(wt, wt.contiguous());
    MIXRT_ASSIGN_OR_RETURN(Tensor back, transpose(wt, 0, 1));
    MIXRT_ASSIGN_OR_RETURN(Tensor y, linear(in[0], back, b));
    return std::vector<Tensor>{y};
  };
  InferenceModeGuard inference;
  AutocastGuard autocast("cpu", DType::kBF16);
  auto f = compile(fn);
  ASSERT_TRUE(f.ok()) << f.status();
  for (int call = 0; call < 3; ++call) ASSERT_TRUE((*f)({x}).ok());
  EXPECT_THAT(f->Explain(), HasSubstr("3 launches on constants kept"));
  ExpectReleasedWhereBf16IsNative(f->Explain());
  ASSERT_TRUE(
      kernels::copy_(w, *randn({96, 64}, DType::kF32, d, 0, 0.2, &g)).ok());
  auto got = (*f)({x});
  ASSERT_TRUE(got.ok()) << got.status();
  ExpectClose((*got)[0], (*fn({x}))[0], x, w, b);
}

}  // namespace
}  // namespace mixrt
