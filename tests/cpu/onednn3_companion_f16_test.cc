// f16 matmuls on the oneDNN 3.x companion, where the plugin's own oneDNN
// (2.6.3) has no f16 product: they must reach the companion as f16, not
// widened to f32 first, come out right, and be reported as native with the
// companion named. The companion here is tests/cpu:fake_onednn3_companion
// (plain loops in double, "fake:loops"), so this runs on every CPU; the
// real one has f16 kernels only on avx512_fp16 CPUs.
//
// Tolerance: the fake sums in double and rounds once to f16, as does the
// reference, so they differ only by f16 rounding of the sum (half an f16
// ulp, 2^-11 relative) plus the double sums' order (negligible).
#include <cmath>
#include <cstdint>
#include <vector>

#include "backends/cpu/capability/cpu_capability.h"
#include "backends/cpu/kernels/cpu_matmul.h"
#include "backends/cpu/onednn/onednn3_companion.h"
#include "gtest/gtest.h"
#include "mixrt/float_convert.h"
#include "tests/testing/absolute_env_path.h"
#include "tests/testing/tensor_desc.h"
#include "tests/testing/uniform_floats.h"

namespace mixrt::cpu {
namespace {

// Before the companion is first loaded (it requires an absolute path).
const bool kAbsoluteLibrary =
    testing::MakeEnvPathAbsolute("MIXRT_CPU_ONEDNN3_LIBRARY");

std::vector<uint16_t> F16s(int64_t n, uint32_t seed) {
  std::vector<uint16_t> v;
  for (float x : testing::UniformFloats(n, seed))
    v.push_back(sdk::F32ToF16Bits(x));
  return v;
}

double Value(uint16_t h) { return sdk::F16BitsToF32(h); }

TEST(OneDnn3CompanionF16Test, F16ProductsRunOnTheCompanionAsF16) {
  ASSERT_TRUE(OneDnn3CompanionLoaded()) << OneDnn3CompanionSummary();
  ASSERT_FALSE(OneDnnHasMatmul(MIXRT_DTYPE_F16))
      << "the plugin's own oneDNN multiplies f16: nothing to test";
  EXPECT_TRUE(MatmulOnCompanion(MIXRT_DTYPE_F16));
  EXPECT_EQ(MatmulImplementation(MIXRT_DTYPE_F16),
            "fake:loops (oneDNN 3.2.0 companion)");

  // A Linear in f16: y[2, 33, 40] = relu(x[2, 33, 70] w^T + bias), w [40, 70].
  const int64_t batch = 2, m = 33, n = 40, k = 70;
  std::vector<uint16_t> x = F16s(batch * m * k, 1), w = F16s(n * k, 2),
                        bias = F16s(n, 3), y(batch * m * n);
  const std::vector<int64_t> x_shape{batch, m, k}, x_strides{m * k, k, 1};
  const std::vector<int64_t> w_shape{batch, k, n}, w_strides{0, 1, k};
  const std::vector<int64_t> b_shape{n}, b_strides{1};
  const std::vector<int64_t> y_shape{batch, m, n}, y_strides{m * n, n, 1};
  const MixrtTensorDesc xd = testing::HostDesc(x.data(), MIXRT_DTYPE_F16,
                                               x_shape, x_strides),
                        wd = testing::HostDesc(w.data(), MIXRT_DTYPE_F16,
                                               w_shape, w_strides),
                        bd = testing::HostDesc(bias.data(), MIXRT_DTYPE_F16,
                                               b_shape, b_strides),
                        yd = testing::HostDesc(y.data(), MIXRT_DTYPE_F16,
                                               y_shape, y_strides);
  MixrtMatmulAttrs attrs{};
  attrs.struct_size = sizeof(attrs);
  attrs.activation = MIXRT_ACTIVATION_RELU;
  sdk::KernelCall call;
  call.op = MIXRT_OP_MATMUL;
  call.inputs.push_back(sdk::TensorRef(xd));
  call.inputs.push_back(sdk::TensorRef(wd));
  call.inputs.push_back(sdk::TensorRef(bd));
  call.outputs.push_back(sdk::TensorRef(yd));
  call.attrs = &attrs;

  const ProductOneDnnCounts before = ProductOneDnnCountsSoFar();
  const absl::Status status = RunMatmul(call);
  ASSERT_TRUE(status.ok()) << status;
  const ProductOneDnnCounts after = ProductOneDnnCountsSoFar();
  // Widened to f32, the product would have run on the plugin's own oneDNN.
  EXPECT_EQ(after.on_companion - before.on_companion, 1);
  EXPECT_EQ(after.on_own, before.on_own);

  for (int64_t s = 0; s < batch; ++s) {
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t j = 0; j < n; ++j) {
        double sum = Value(bias[j]);
        for (int64_t l = 0; l < k; ++l)
          sum += Value(x[(s * m + i) * k + l]) * Value(w[j * k + l]);
        const double want = std::max(sum, 0.0);
        const double got = Value(y[(s * m + i) * n + j]);
        ASSERT_NEAR(got, want, std::ldexp(std::fabs(want), -11) + 1e-6)
            << "y[" << s << ", " << i << ", " << j << "]";
      }
    }
  }
}

TEST(OneDnn3CompanionF16Test, CapabilityNamesTheCompanion) {
  MatmulSpeeds speeds;
  speeds.f16_vs_f32 = 1.6;
  speeds.source = "given";
  const sdk::Capability f16 = CapabilityTable::Detect(speeds).Get(
      MIXRT_OP_CLASS_MATMUL, MIXRT_DTYPE_F16);
  EXPECT_EQ(f16.level, MIXRT_SUPPORT_NATIVE) << f16.reason;
  EXPECT_NE(f16.reason.find("fake:loops (oneDNN 3.2.0 companion)"),
            std::string::npos)
      << f16.reason;
  // The same measured slower than f32 is native but slow, said so.
  speeds.f16_vs_f32 = 0.8;
  const sdk::Capability slow = CapabilityTable::Detect(speeds).Get(
      MIXRT_OP_CLASS_MATMUL, MIXRT_DTYPE_F16);
  EXPECT_EQ(slow.level, MIXRT_SUPPORT_SLOW) << slow.reason;
}

// A name that is not an absolute path is refused before anything is
// opened: checked here, a bare one would be searched for by the dynamic
// loader in LD_LIBRARY_PATH (a library from a 0777 directory ran there).
TEST(OneDnn3CompanionF16Test, ARelativeOrBareLibraryNameIsRefused) {
  for (const char* name : {"libfake_onednn3_companion.so",
                           "tests/cpu/libfake_onednn3_companion.so"}) {
    const std::string why = OneDnn3CompanionRefusal(name);
    EXPECT_NE(why.find("is not an absolute path"), std::string::npos) << why;
  }
}

}  // namespace
}  // namespace mixrt::cpu
