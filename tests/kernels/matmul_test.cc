// matmul / linear on the reference plugin against a host triple loop.
#include "core/kernels/matmul.h"

#include <cmath>
#include <cstdlib>
#include <string>
#include <vector>

#include "core/plugin/registry.h"
#include "core/tensor/factories.h"
#include "core/tensor/op_profile.h"
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

// C[b] = A[b or 0] @ B[b or 0], row-major.
std::vector<double> HostMatmul(const std::vector<double>& a,
                               const std::vector<double>& b, int batch, int m,
                               int k, int n, bool a_batched, bool b_batched) {
  std::vector<double> c(batch * m * n, 0.0);
  for (int t = 0; t < batch; ++t)
    for (int i = 0; i < m; ++i)
      for (int j = 0; j < n; ++j) {
        double s = 0;
        for (int p = 0; p < k; ++p) {
          s += a[(a_batched ? t : 0) * m * k + i * k + p] *
               b[(b_batched ? t : 0) * k * n + p * n + j];
        }
        c[t * m * n + i * n + j] = s;
      }
  return c;
}

class MatmulTest : public ::testing::Test {
 protected:
  void SetUp() override { device_ = testing::ReferenceDevice(); }
  Device device_;
};

TEST_F(MatmulTest, OddShapesInEveryFloatDtype) {
  const int m = 13, k = 17, n = 9;
  for (DType dtype : {DType::kF32, DType::kF16, DType::kBF16}) {
    Tensor a =
        MakeTensor(device_, testing::RandomValues(m * k, 1), {m, k}, dtype);
    Tensor b =
        MakeTensor(device_, testing::RandomValues(k * n, 2), {k, n}, dtype);
    const std::vector<double> want =
        HostMatmul(Values(a), Values(b), 1, m, k, n, false, false);
    // Exact products summed in double, one rounding into dtype. (The
    // sum of k terms of size ~1 is ~sqrt(k); allow an absolute term of
    // one ulp at that magnitude.)
    const double tol = testing::RoundingTolerance(dtype);
    ExpectClose(Values(matmul(a, b)), want, tol, tol * std::sqrt(k),
                absl::StrCat("matmul ", DTypeName(dtype)));
    MatmulOptions f32_out;
    f32_out.out_dtype = DType::kF32;
    auto wide = matmul(a, b, f32_out);
    ASSERT_TRUE(wide.ok()) << wide.status();
    EXPECT_EQ(wide->dtype(), DType::kF32);
    ExpectClose(Values(wide), want, 1e-6, 1e-6, "matmul f32 output");
  }
}

TEST_F(MatmulTest, BatchBroadcastTransposedOperandsAndVectors) {
  const int batch = 3, m = 4, k = 5, n = 2;
  Tensor a = MakeTensor(device_, testing::RandomValues(batch * m * k, 3),
                        {batch, m, k});
  // b given as [n, k] and transposed: a strided operand.
  Tensor bt = MakeTensor(device_, testing::RandomValues(n * k, 4), {n, k});
  auto b = bt.transpose(0, 1);
  ASSERT_TRUE(b.ok());
  auto c = matmul(a, *b);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_THAT(c->shape(), ElementsAre(batch, m, n));
  const std::vector<double> b_dense = Values(b->contiguous());
  ExpectClose(Values(c),
              HostMatmul(Values(a), b_dense, batch, m, k, n, true, false), 1e-6,
              1e-6, "batched");
  // Vector cases follow numpy: [k] @ [k, n] -> [n]; [m, k] @ [k] -> [m].
  Tensor v = MakeTensor(device_, testing::RandomValues(k, 5), {k});
  auto vm = matmul(v, *b);
  ASSERT_TRUE(vm.ok());
  EXPECT_THAT(vm->shape(), ElementsAre(n));
  auto mv = matmul(*a.slice(0, 0, 1)->view({m, k}), v);
  ASSERT_TRUE(mv.ok());
  EXPECT_THAT(mv->shape(), ElementsAre(m));
  EXPECT_THAT(matmul(a, a).status().message(),
              HasSubstr("cannot be multiplied (5 vs 4)"));
}

TEST_F(MatmulTest, LinearWithBiasAndActivationEpilogue) {
  const int rows = 6, in = 7, out = 5;
  Tensor x =
      MakeTensor(device_, testing::RandomValues(rows * in, 6), {rows, in});
  Tensor w = MakeTensor(device_, testing::RandomValues(out * in, 7), {out, in});
  Tensor bias = MakeTensor(device_, testing::RandomValues(out, 8), {out});
  const std::vector<double> xs = Values(x), ws = Values(w), bs = Values(bias);
  std::vector<double> want;
  for (int r = 0; r < rows; ++r)
    for (int o = 0; o < out; ++o) {
      double s = bs[o];
      for (int i = 0; i < in; ++i) s += xs[r * in + i] * ws[o * in + i];
      want.push_back(std::max(s, 0.0));
    }
  MatmulOptions relu;
  relu.activation = MIXRT_ACTIVATION_RELU;
  ExpectClose(Values(linear(x, w, bias, relu)), want, 1e-6, 1e-6,
              "linear+bias+relu");
  EXPECT_THAT(linear(x, w, x).status().message(),
              HasSubstr("bias has shape [6, 7], expected [5]"));
  Tensor wh = MakeTensor(device_, testing::RandomValues(out * in, 7), {out, in},
                         DType::kF16);
  EXPECT_THAT(linear(x, wh, bias).status().message(),
              HasSubstr("dtypes f32 and f16; they must match"));
}

TEST_F(MatmulTest, EmptyInnerDimensionGivesBias) {
  auto a = zeros({3, 0}, DType::kF32, device_);
  auto w = zeros({2, 0}, DType::kF32, device_);
  Tensor bias = MakeTensor(device_, {1.5, -2}, {2});
  auto y = linear(*a, *w, bias);
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_THAT(Values(y), ElementsAre(1.5, -2, 1.5, -2, 1.5, -2));
}

// The launches (as the op profile names them) of linear(x, W, b) and of a
// weight gradient's grad^T @ x on the fake accelerator laid out as
// MIXRT_FAKE_LAYOUT says, with their values.
struct LayoutRun {
  std::vector<std::string> ops;
  std::vector<double> y, grad_w;
};

LayoutRun RunOnLayout(const char* layout, const std::vector<float>& xs,
                      const std::vector<float>& ws,
                      const std::vector<float>& gs) {
  // Read by the fixture when it reports its properties at load.
  EXPECT_EQ(setenv("MIXRT_FAKE_LAYOUT", layout, 1), 0);
  Registry registry;
  auto backend = registry.Load(
      testing::RunfilePath("tests/fixtures/libmixrt_fake_accelerator.so"));
  EXPECT_TRUE(backend.ok()) << backend.status();
  LayoutRun run;
  if (!backend.ok()) return run;
  const Device d(*backend, 0);
  Tensor x = MakeTensor(d, xs, {6, 7});
  Tensor w = MakeTensor(d, ws, {5, 7});
  Tensor g = MakeTensor(d, gs, {6, 5});
  Tensor b = MakeTensor(d, {0.5, -1, 0.25, 0, 2}, {5});
  auto g_t = g.transpose(0, 1);
  EXPECT_TRUE(g_t.ok());
  ResetOpProfile();
  EnableOpProfile(true);
  auto y = linear(x, w, b);
  auto grad_w = matmul(*g_t, x);
  EnableOpProfile(false);
  unsetenv("MIXRT_FAKE_LAYOUT");
  EXPECT_TRUE(y.ok()) << y.status();
  EXPECT_TRUE(grad_w.ok()) << grad_w.status();
  for (const OpProfileEntry& e : OpProfileEntries()) run.ops.push_back(e.op);
  run.y = Values(y);
  run.grad_w = Values(grad_w);
  return run;
}

// A device that needs dense tensors gets a copy of every transposed
// operand; one that also reads transposed matmul operands (cuBLASLt's op
// T) gets the views themselves, and the same values.
TEST_F(MatmulTest, TransposedOperandsReachADeviceThatReadsThem) {
  const std::vector<float> xs = testing::RandomValues(42, 11),
                           ws = testing::RandomValues(35, 12),
                           gs = testing::RandomValues(30, 13);
  const LayoutRun dense = RunOnLayout("dense", xs, ws, gs);
  const LayoutRun direct = RunOnLayout("dense_transposed", xs, ws, gs);
  EXPECT_THAT(dense.ops, ::testing::Contains("copy f32 -> f32"));
  EXPECT_THAT(direct.ops,
              ::testing::Not(::testing::Contains("copy f32 -> f32")));
  EXPECT_THAT(direct.ops, ::testing::Contains("matmul f32 -> f32"));
  std::vector<double> want_y, want_gw;
  const double bias[] = {0.5, -1, 0.25, 0, 2};
  for (int r = 0; r < 6; ++r)
    for (int o = 0; o < 5; ++o) {
      double s = bias[o];
      for (int i = 0; i < 7; ++i) s += xs[r * 7 + i] * ws[o * 7 + i];
      want_y.push_back(s);
    }
  for (int o = 0; o < 5; ++o)
    for (int i = 0; i < 7; ++i) {
      double s = 0;
      for (int r = 0; r < 6; ++r) s += gs[r * 5 + o] * xs[r * 7 + i];
      want_gw.push_back(s);
    }
  // f32 sums of 6-7 products of values in [-1, 1].
  ExpectClose(direct.y, want_y, 1e-5, 1e-5, "linear, transposed weight");
  ExpectClose(direct.grad_w, want_gw, 1e-5, 1e-5, "grad^T @ x");
  ExpectClose(dense.y, want_y, 1e-5, 1e-5, "linear, dense copy");
  ExpectClose(dense.grad_w, want_gw, 1e-5, 1e-5, "grad^T @ x, dense copy");
}

}  // namespace
}  // namespace mixrt::kernels
