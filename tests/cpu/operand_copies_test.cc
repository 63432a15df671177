// The operand copies the plugin makes for oneDNN's AVX2 f32 gemm
// (backends/cpu/kernels/operand_copies.h): which products take them, and
// that a product run on them equals the product of the operands as given.
// Run with ONEDNN_MAX_CPU_ISA=AVX2 (BUILD) so the copies are made on every
// CPU kind, AVX-512 ones capped.
//
// Tolerance: each output sums k products of values below 2 in magnitude
// in f32, which oneDNN may order any way: |error| <= k * 2^-24 * sum |terms|
// (at most k * 4 each); k * k * 4 * 2^-24 bounds it.
#include "backends/cpu/kernels/operand_copies.h"

#include <cmath>
#include <cstdint>
#include <vector>

#include "backends/cpu/capability/cpu_info.h"
#include "backends/cpu/kernels/cpu_matmul.h"
#include "gtest/gtest.h"
#include "tests/testing/tensor_desc.h"
#include "tests/testing/uniform_floats.h"

namespace mixrt::cpu {
namespace {

MatmulShape Shape(int64_t m, int64_t k, int64_t n,
                  std::vector<int64_t> a_strides,
                  std::vector<int64_t> b_strides) {
  MatmulShape shape;
  shape.a = {MIXRT_DTYPE_F32, {m, k}, a_strides};
  shape.b = {MIXRT_DTYPE_F32, {k, n}, b_strides};
  shape.c = {MIXRT_DTYPE_F32, {m, n}, {n, 1}};
  return shape;
}

TEST(OperandCopiesTest, TransposedAIntoRowsOnlyForTallNarrowProducts) {
  // x^T dy for a Linear(256 -> 1024) over 1024 tokens: m 1024, n 256.
  EXPECT_TRUE(RowMajorAFaster(Shape(1024, 1024, 256, {1, 1024}, {256, 1})));
  EXPECT_TRUE(RowMajorAFaster(Shape(512, 300, 128, {1, 520}, {128, 1})));
  EXPECT_FALSE(RowMajorAFaster(Shape(1024, 1024, 256, {1024, 1}, {256, 1})))
      << "a already in rows";
  EXPECT_FALSE(RowMajorAFaster(Shape(1024, 1024, 1024, {1, 1024}, {1024, 1})))
      << "c as wide as tall";
  EXPECT_FALSE(RowMajorAFaster(Shape(256, 1024, 128, {1, 256}, {128, 1})))
      << "c short";
  MatmulShape bf16 = Shape(1024, 1024, 256, {1, 1024}, {256, 1});
  bf16.a.dtype = bf16.b.dtype = MIXRT_DTYPE_BF16;
  EXPECT_FALSE(RowMajorAFaster(bf16));
  MatmulShape packed = Shape(1024, 1024, 256, {1, 1024}, {256, 1});
  packed.packed_b = true;
  EXPECT_FALSE(RowMajorAFaster(packed));
}

TEST(OperandCopiesTest, PaddedBOnlyForRows2KiBApartAndShortProducts) {
  EXPECT_TRUE(PaddedBFaster(Shape(256, 1024, 1024, {1024, 1}, {1024, 1})));
  EXPECT_TRUE(PaddedBFaster(Shape(64, 100, 600, {100, 1}, {1536, 1})))
      << "a column slice of rows 6 KiB apart";
  EXPECT_FALSE(PaddedBFaster(Shape(256, 1024, 1000, {1024, 1}, {1000, 1})))
      << "rows not a multiple of 2 KiB apart";
  EXPECT_FALSE(PaddedBFaster(Shape(256, 1024, 1024, {1024, 1}, {1, 1024})))
      << "b transposed (a Linear's forward)";
  EXPECT_FALSE(PaddedBFaster(Shape(256, 1024, 1024, {1024, 1}, {0, 1})))
      << "one row repeated (stride 0)";
  EXPECT_FALSE(PaddedBFaster(Shape(512, 1024, 1024, {1024, 1}, {1024, 1})))
      << "m 512";
  EXPECT_FALSE(PaddedBFaster(Shape(32, 1024, 1024, {1024, 1}, {1024, 1})))
      << "m 32: the copy costs what the product does";
}

// y = relu(a x b + bias) + beta * y through RunMatmul, a and b given as
// (memory, strides) over m x k and k x n, checked against sums in double.
void CheckProduct(int64_t m, int64_t k, int64_t n,
                  const std::vector<int64_t>& a_strides,
                  const std::vector<int64_t>& b_strides, float beta) {
  const int64_t a_extent = (m - 1) * a_strides[0] + (k - 1) * a_strides[1] + 1;
  const int64_t b_extent = (k - 1) * b_strides[0] + (n - 1) * b_strides[1] + 1;
  std::vector<float> a = testing::UniformFloats(a_extent, 1),
                     b = testing::UniformFloats(b_extent, 2),
                     bias = testing::UniformFloats(n, 3),
                     y = testing::UniformFloats(m * n, 4);
  const std::vector<float> y_before = y;
  const std::vector<int64_t> a_shape{m, k}, b_shape{k, n}, bias_shape{n},
      bias_strides{1}, y_shape{m, n}, y_strides{n, 1};
  const MixrtTensorDesc ad = testing::HostDesc(a.data(), MIXRT_DTYPE_F32,
                                               a_shape, a_strides),
                        bd = testing::HostDesc(b.data(), MIXRT_DTYPE_F32,
                                               b_shape, b_strides),
                        biasd = testing::HostDesc(bias.data(), MIXRT_DTYPE_F32,
                                                  bias_shape, bias_strides),
                        yd = testing::HostDesc(y.data(), MIXRT_DTYPE_F32,
                                               y_shape, y_strides);
  MixrtMatmulAttrs attrs{};
  attrs.struct_size = sizeof(attrs);
  attrs.activation = MIXRT_ACTIVATION_RELU;
  attrs.beta = beta;
  sdk::KernelCall call;
  call.op = MIXRT_OP_MATMUL;
  call.inputs = {sdk::TensorRef(ad), sdk::TensorRef(bd), sdk::TensorRef(biasd)};
  call.outputs = {sdk::TensorRef(yd)};
  call.attrs = &attrs;
  const absl::Status status = RunMatmul(call);
  ASSERT_TRUE(status.ok()) << status;

  const double tolerance = std::ldexp(4.0 * k * k, -24) + 1e-6;
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      double sum = bias[j];
      for (int64_t l = 0; l < k; ++l) {
        sum += double{a[i * a_strides[0] + l * a_strides[1]]} *
               b[l * b_strides[0] + j * b_strides[1]];
      }
      const double want = std::max(sum, 0.0) + beta * y_before[i * n + j];
      ASSERT_NEAR(y[i * n + j], want, tolerance)
          << "y[" << i << ", " << j << "]";
    }
  }
}

TEST(OperandCopiesTest, ProductsOnTheCopiesEqualTheOperandsProducts) {
  ASSERT_FALSE(GetCpuInfo().onednn_avx512)
      << "run with ONEDNN_MAX_CPU_ISA=AVX2 (the copies are made only there)";
  const OperandCopyCounts before = OperandCopyCountsSoFar();
  // a transposed, ragged against the 32 x 32 copy blocks and the 8 x 8
  // transposes (m 1000, k 301), rows 1003 apart.
  CheckProduct(1000, 301, 200, {1, 1003}, {200, 1}, 0);
  // k a multiple of 512: the copy's rows padded.
  CheckProduct(600, 512, 100, {1, 600}, {100, 1}, 0);
  const OperandCopyCounts a_copied = OperandCopyCountsSoFar();
  EXPECT_EQ(a_copied.a_into_rows - before.a_into_rows, 2);
  EXPECT_EQ(a_copied.b_padded, before.b_padded);

  // b a 600-column slice of rows 1024 apart, accumulating into y.
  CheckProduct(200, 257, 600, {257, 1}, {1024, 1}, 0.5f);
  const OperandCopyCounts b_copied = OperandCopyCountsSoFar();
  EXPECT_EQ(b_copied.b_padded - a_copied.b_padded, 1);
  EXPECT_EQ(b_copied.a_into_rows, a_copied.a_into_rows);

  // Outside both regions: nothing copied.
  CheckProduct(300, 200, 300, {1, 300}, {512, 1}, 0);
  const OperandCopyCounts after = OperandCopyCountsSoFar();
  EXPECT_EQ(after.a_into_rows, b_copied.a_into_rows);
  EXPECT_EQ(after.b_padded, b_copied.b_padded);
}

}  // namespace
}  // namespace mixrt::cpu
