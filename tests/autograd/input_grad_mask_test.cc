// Backwards that compute only the input gradients that go somewhere
// (PyTorch's needs_input_grad): a Linear, matmul or convolution whose input
// needs no gradient (a network's first layer, the data) or whose weight is
// frozen leaves that gradient out, and the gradients it does compute are
// the ones computed when every input needs one.
#include <memory>
#include <vector>

#include "core/autograd/node.h"
#include "core/functional/ops.h"
#include "core/tensor/tensor.h"
#include "gtest/gtest.h"
#include "tests/testing/op_test_util.h"
#include "tests/testing/test_plugins.h"

namespace mixrt {
namespace {

using testing::ExpectClose;
using testing::MakeTensor;
using testing::RandomValues;
using testing::Values;

constexpr int64_t kBatch = 4, kIn = 3, kOut = 5;

Tensor Leaf(const Device& device, const std::vector<int64_t>& shape,
            uint64_t seed, bool requires_grad) {
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  Tensor t = MakeTensor(device, RandomValues(n, seed), shape);
  EXPECT_TRUE(t.set_requires_grad(requires_grad).ok());
  return t;
}

// The gradients y's backward node returns for `grad`.
std::vector<Tensor> NodeGradients(const Tensor& y, const Tensor& grad) {
  std::shared_ptr<Node> node = y.autograd_meta()->grad_fn;
  EXPECT_NE(node, nullptr);
  if (node == nullptr) return {};
  absl::StatusOr<std::vector<Tensor>> out = node->Apply({grad});
  EXPECT_TRUE(out.ok()) << out.status();
  return out.ok() ? *out : std::vector<Tensor>{};
}

// Row-major a [m, k] times b [k, n] (or b^T when b is [n, k]), in double.
std::vector<double> Product(const std::vector<double>& a,
                            const std::vector<double>& b, int64_t m, int64_t k,
                            int64_t n, bool b_transposed) {
  std::vector<double> c(m * n, 0.0);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j)
      for (int64_t p = 0; p < k; ++p)
        c[i * n + j] +=
            a[i * k + p] * (b_transposed ? b[j * k + p] : b[p * n + j]);
  return c;
}

std::vector<double> Transposed(const std::vector<double>& a, int64_t rows,
                               int64_t cols) {
  std::vector<double> t(a.size());
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j) t[j * rows + i] = a[i * cols + j];
  return t;
}

// f32 products of a few terms: a few units of f32 roundoff.
constexpr double kRtol = 1e-5, kAtol = 1e-5;

TEST(InputGradMaskTest, LinearOnDataComputesNoDataGradient) {
  const Device device = testing::ReferenceDevice();
  const Tensor x = Leaf(device, {kBatch, kIn}, 1, /*requires_grad=*/false);
  const Tensor w = Leaf(device, {kOut, kIn}, 2, true);
  const Tensor b = Leaf(device, {kOut}, 3, true);
  absl::StatusOr<Tensor> y = linear(x, w, b);
  ASSERT_TRUE(y.ok()) << y.status();
  const Tensor g = Leaf(device, {kBatch, kOut}, 4, false);
  const std::vector<Tensor> grads = NodeGradients(*y, g);
  ASSERT_EQ(grads.size(), 3u);
  EXPECT_FALSE(grads[0].defined()) << "a gradient for data that needs none";
  // dW = g^T x; db = the columns' sums of g.
  const std::vector<double> gv = Values(g), xv = Values(x);
  ExpectClose(Values(grads[1]),
              Product(Transposed(gv, kBatch, kOut), xv, kOut, kBatch, kIn,
                      /*b_transposed=*/false),
              kRtol, kAtol, "dW");
  std::vector<double> db(kOut, 0.0);
  for (int64_t i = 0; i < kBatch; ++i)
    for (int64_t j = 0; j < kOut; ++j) db[j] += gv[i * kOut + j];
  ExpectClose(Values(grads[2]), db, kRtol, kAtol, "db");
}

TEST(InputGradMaskTest, LinearWithFrozenWeightComputesOnlyDataGradient) {
  const Device device = testing::ReferenceDevice();
  const Tensor x = Leaf(device, {kBatch, kIn}, 1, true);
  const Tensor w = Leaf(device, {kOut, kIn}, 2, /*requires_grad=*/false);
  const Tensor b = Leaf(device, {kOut}, 3, false);
  absl::StatusOr<Tensor> y = linear(x, w, b);
  ASSERT_TRUE(y.ok()) << y.status();
  const Tensor g = Leaf(device, {kBatch, kOut}, 4, false);
  const std::vector<Tensor> grads = NodeGradients(*y, g);
  ASSERT_EQ(grads.size(), 3u);
  // dx = g W.
  ExpectClose(Values(grads[0]),
              Product(Values(g), Values(w), kBatch, kOut, kIn, false), kRtol,
              kAtol, "dx");
  EXPECT_FALSE(grads[1].defined()) << "a gradient for a frozen weight";
  EXPECT_FALSE(grads[2].defined()) << "a gradient for a frozen bias";
}

TEST(InputGradMaskTest, MatmulComputesOnlyTheNeededSide) {
  const Device device = testing::ReferenceDevice();
  const Tensor a = Leaf(device, {kBatch, kIn}, 5, false);
  const Tensor b = Leaf(device, {kIn, kOut}, 6, true);
  absl::StatusOr<Tensor> y = matmul(a, b);
  ASSERT_TRUE(y.ok()) << y.status();
  const Tensor g = Leaf(device, {kBatch, kOut}, 7, false);
  const std::vector<Tensor> grads = NodeGradients(*y, g);
  ASSERT_EQ(grads.size(), 2u);
  EXPECT_FALSE(grads[0].defined());
  // db = a^T g.
  ExpectClose(Values(grads[1]),
              Product(Transposed(Values(a), kBatch, kIn), Values(g), kIn,
                      kBatch, kOut, false),
              kRtol, kAtol, "db");
}

// A loss against data (the target) computes no target gradient, and the
// input's is 2 (x - t) / n (mean reduction) times the loss's gradient.
TEST(InputGradMaskTest, LossAgainstDataComputesNoTargetGradient) {
  const Device device = testing::ReferenceDevice();
  const Tensor x = Leaf(device, {kBatch, kOut}, 15, true);
  const Tensor t = Leaf(device, {kBatch, kOut}, 16, false);
  absl::StatusOr<Tensor> loss = mse_loss(x, t);
  ASSERT_TRUE(loss.ok()) << loss.status();
  const Tensor g = MakeTensor(device, {3.0f}, {});
  const std::vector<Tensor> grads = NodeGradients(*loss, g);
  ASSERT_EQ(grads.size(), 2u);
  const std::vector<double> xv = Values(x), tv = Values(t);
  std::vector<double> want(xv.size());
  for (size_t i = 0; i < xv.size(); ++i)
    want[i] = 3.0 * 2.0 * (xv[i] - tv[i]) / static_cast<double>(xv.size());
  ExpectClose(Values(grads[0]), want, kRtol, kAtol, "d input");
  EXPECT_FALSE(grads[1].defined()) << "a gradient for the target";
}

// A product with a constant (a mask, a scale) computes no gradient for it.
TEST(InputGradMaskTest, ProductWithAConstantComputesOnlyTheOtherGradient) {
  const Device device = testing::ReferenceDevice();
  const Tensor a = Leaf(device, {kBatch, kOut}, 17, false);
  const Tensor b = Leaf(device, {kBatch, kOut}, 18, true);
  for (bool divide : {false, true}) {
    absl::StatusOr<Tensor> y = divide ? div(b, a) : mul(a, b);
    ASSERT_TRUE(y.ok()) << y.status();
    const Tensor g = Leaf(device, {kBatch, kOut}, 19, false);
    const std::vector<Tensor> grads = NodeGradients(*y, g);
    ASSERT_EQ(grads.size(), 2u);
    const int constant = divide ? 1 : 0;
    EXPECT_FALSE(grads[constant].defined()) << (divide ? "div" : "mul");
    const std::vector<double> av = Values(a), gv = Values(g);
    std::vector<double> want(av.size());
    for (size_t i = 0; i < av.size(); ++i)
      want[i] = divide ? gv[i] / av[i] : gv[i] * av[i];
    ExpectClose(Values(grads[1 - constant]), want, kRtol, kAtol,
                divide ? "d numerator" : "d other factor");
  }
}

// The weight gradients of a convolution on images that need no gradient are
// the ones computed when they do (the same kernel on the same operands).
TEST(InputGradMaskTest, ConvolutionOnImagesComputesNoImageGradient) {
  const Device device = testing::ReferenceDevice();
  std::vector<std::vector<double>> weight_grads;
  for (bool images_need_grad : {true, false}) {
    const Tensor x = Leaf(device, {2, 3, 6, 6}, 8, images_need_grad);
    const Tensor w = Leaf(device, {4, 3, 3, 3}, 9, true);
    const Tensor b = Leaf(device, {4}, 10, true);
    absl::StatusOr<Tensor> y = conv2d(x, w, b);
    ASSERT_TRUE(y.ok()) << y.status();
    const Tensor g =
        Leaf(device, std::vector<int64_t>(y->shape().begin(), y->shape().end()),
             11, false);
    const std::vector<Tensor> grads = NodeGradients(*y, g);
    ASSERT_EQ(grads.size(), 3u);
    EXPECT_EQ(grads[0].defined(), images_need_grad);
    ASSERT_TRUE(grads[1].defined());
    ASSERT_TRUE(grads[2].defined());
    weight_grads.push_back(Values(grads[1]));
  }
  EXPECT_EQ(weight_grads[0], weight_grads[1]);
}

// Through the engine: an MLP's parameter gradients are the same whether or
// not its data needs a gradient, and the data gets none when it needs none.
TEST(InputGradMaskTest, BackwardGivesTheSameParameterGradients) {
  const Device device = testing::ReferenceDevice();
  std::vector<std::vector<double>> grads;
  for (bool data_needs_grad : {true, false}) {
    const Tensor x = Leaf(device, {kBatch, kIn}, 12, data_needs_grad);
    const Tensor w1 = Leaf(device, {kOut, kIn}, 13, true);
    const Tensor w2 = Leaf(device, {2, kOut}, 14, true);
    absl::StatusOr<Tensor> h = linear(x, w1, Tensor());
    ASSERT_TRUE(h.ok()) << h.status();
    absl::StatusOr<Tensor> r = relu(*h);
    ASSERT_TRUE(r.ok()) << r.status();
    absl::StatusOr<Tensor> y = linear(*r, w2, Tensor());
    ASSERT_TRUE(y.ok()) << y.status();
    absl::StatusOr<Tensor> loss = sum(*y);
    ASSERT_TRUE(loss.ok()) << loss.status();
    ASSERT_TRUE(loss->backward().ok());
    EXPECT_EQ(x.grad().defined(), data_needs_grad);
    grads.push_back(Values(w1.grad()));
    grads.push_back(Values(w2.grad()));
  }
  EXPECT_EQ(grads[0], grads[2]);
  EXPECT_EQ(grads[1], grads[3]);
}

}  // namespace
}  // namespace mixrt
