// A oneDNN 3.x companion with the right entry points and version numbers
// that answers products without computing them (tests/cpu:
// fake_onednn3_companion.cc built to lie) is dropped with the reason: at
// load when it gets known products wrong, or at the first product shape
// whose answer disagrees with the plugin's own oneDNN, which then computes
// that product and every later one; it is never reported as in use.
#include <cmath>
#include <string>
#include <vector>

#include "backends/cpu/kernels/cpu_matmul.h"
#include "backends/cpu/onednn/onednn3_companion.h"
#include "gtest/gtest.h"
#include "tests/testing/absolute_env_path.h"
#include "tests/testing/tensor_desc.h"
#include "tests/testing/test_plugins.h"
#include "tests/testing/uniform_floats.h"

namespace mixrt::cpu {
namespace {

// Before the companion is first loaded (it requires an absolute path).
const bool kAbsoluteLibrary =
    testing::MakeEnvPathAbsolute("MIXRT_CPU_ONEDNN3_LIBRARY");

TEST(LyingCompanionTest, OneThatGetsKnownProductsWrongIsNeverLoaded) {
  const std::string why = OneDnn3CompanionRefusal(testing::RunfilePath(
      "tests/cpu/libfake_onednn3_companion_lies_always.so"));
  EXPECT_NE(why.find("dropped: its 64x64x64 product of f32 inputs is wrong: "
                     "element 0 is nan where"),
            std::string::npos)
      << why;
}

TEST(LyingCompanionTest, OneWhoseFirstAnswerDisagreesIsDropped) {
  // Honest on the products checked at load.
  ASSERT_TRUE(OneDnn3CompanionLoaded()) << OneDnn3CompanionSummary();
  const int64_t m = 96, n = 80, k = 72;
  std::vector<float> x = testing::UniformFloats(m * k, 1),
                     w = testing::UniformFloats(k * n, 2), y(m * n, 0.0f);
  // The descriptors point at these (they outlive the call).
  const std::vector<int64_t> x_shape{m, k}, x_strides{k, 1}, w_shape{k, n},
      w_strides{n, 1}, y_shape{m, n}, y_strides{n, 1};
  const MixrtTensorDesc xd = testing::HostDesc(x.data(), MIXRT_DTYPE_F32,
                                               x_shape, x_strides),
                        wd = testing::HostDesc(w.data(), MIXRT_DTYPE_F32,
                                               w_shape, w_strides),
                        yd = testing::HostDesc(y.data(), MIXRT_DTYPE_F32,
                                               y_shape, y_strides);
  sdk::KernelCall call;
  call.op = MIXRT_OP_MATMUL;
  call.inputs.push_back(sdk::TensorRef(xd));
  call.inputs.push_back(sdk::TensorRef(wd));
  call.outputs.push_back(sdk::TensorRef(yd));
  MixrtMatmulAttrs attrs{};
  attrs.struct_size = sizeof(attrs);
  call.attrs = &attrs;
  const absl::Status status = RunMatmul(call);
  ASSERT_TRUE(status.ok()) << status;
  // The product is right: the plugin's own oneDNN computed it.
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      double want = 0;
      for (int64_t l = 0; l < k; ++l) {
        want += double{x[i * k + l]} * w[l * n + j];
      }
      // f32 accumulation of k terms below 4 in magnitude (inputs uniform
      // in [-2, 2)): at most k f32 ulps of 4k.
      ASSERT_NEAR(y[i * n + j], want, k * 4.0 * k * std::ldexp(1.0, -24))
          << "y[" << i << ", " << j << "]";
    }
  }
  EXPECT_FALSE(OneDnn3CompanionLoaded());
  const std::string summary = OneDnn3CompanionSummary();
  EXPECT_NE(summary.find("not used"), std::string::npos) << summary;
  EXPECT_NE(summary.find("disagreed with the plugin's own oneDNN"),
            std::string::npos)
      << summary;
  EXPECT_EQ(MatmulImplementation(MIXRT_DTYPE_F32).find("companion"),
            std::string::npos);
}

}  // namespace
}  // namespace mixrt::cpu
