// The view, join and mask ops a transformer needs (permute, narrow, split,
// chunk, cat, stack, masked_fill, triu, tril): values against index loops
// written here, gradients through loss = sum(y * w) with a fixed w, whose
// gradient is w carried back to where each element came from.
#include <cmath>
#include <vector>

#include "absl/status/statusor.h"
#include "core/amp/autocast/autocast.h"
#include "core/functional/ops.h"
#include "core/kernels/pointwise.h"
#include "core/tensor/factories.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/op_test_util.h"
#include "tests/testing/test_plugins.h"

namespace mixrt {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using testing::Values;

class ShapeOps : public ::testing::Test {
 protected:
  void SetUp() override { d_ = testing::ReferenceDevice(); }

  // 0, 1, 2, ... in `shape`, requiring grad.
  Tensor Iota(std::vector<int64_t> shape, DType dtype = DType::kF32) {
    int64_t n = 1;
    for (int64_t s : shape) n *= s;
    std::vector<float> v(n);
    for (int64_t i = 0; i < n; ++i) v[i] = static_cast<float>(i);
    Tensor t = testing::MakeTensor(d_, v, shape, dtype);
    EXPECT_TRUE(t.set_requires_grad(true).ok());
    return t;
  }

  // backward of sum(y * w) with w = 100 + 0, 1, 2, ... in y's shape.
  std::vector<float> Weights(const Tensor& y) {
    std::vector<float> w(y.numel());
    for (size_t i = 0; i < w.size(); ++i) w[i] = 100.0f + i;
    return w;
  }
  void Backward(const Tensor& y) {
    Tensor w = testing::MakeTensor(
        d_, Weights(y),
        std::vector<int64_t>(y.shape().begin(), y.shape().end()), y.dtype());
    absl::StatusOr<Tensor> loss = sum(*mul(y, w));
    ASSERT_TRUE(loss.ok()) << loss.status();
    ASSERT_TRUE(loss->backward().ok());
  }

  Device d_;
};

TEST_F(ShapeOps, PermuteMovesValuesAndGradientsBack) {
  Tensor x = Iota({2, 3, 4});
  absl::StatusOr<Tensor> y = permute(x, {2, 0, 1});
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_EQ(y->shape(), (Shape{4, 2, 3}));
  std::vector<double> want, grad(24);
  for (int k = 0; k < 4; ++k)
    for (int i = 0; i < 2; ++i)
      for (int j = 0; j < 3; ++j) {
        const int src = i * 12 + j * 4 + k;
        grad[src] = 100 + want.size();
        want.push_back(src);
      }
  EXPECT_EQ(Values(*y), want);
  Backward(*y);
  EXPECT_EQ(Values(x.grad()), grad);
  EXPECT_FALSE(permute(x, {0, 1}).ok());
}

TEST_F(ShapeOps, NarrowSplitAndChunk) {
  Tensor x = Iota({2, 7});
  absl::StatusOr<Tensor> y = narrow(x, 1, -3, 2);  // Columns 4 and 5.
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_EQ(Values(*y), (std::vector<double>{4, 5, 11, 12}));
  Backward(*y);
  std::vector<double> grad(14, 0);
  grad[4] = 100, grad[5] = 101, grad[11] = 102, grad[12] = 103;
  EXPECT_EQ(Values(x.grad()), grad);
  EXPECT_THAT(narrow(x, 1, 5, 3).status().message(),
              HasSubstr("do not fit dimension 1 of size 7"));
  EXPECT_THAT(narrow(x, 2, 0, 1).status().message(),
              HasSubstr("dimension 2 is out of range"));

  auto sizes = [](const absl::StatusOr<std::vector<Tensor>>& parts) {
    std::vector<int64_t> s;
    for (const Tensor& p : *parts) s.push_back(p.shape()[1]);
    return s;
  };
  EXPECT_THAT(sizes(split(x, 3, 1)), ElementsAre(3, 3, 1));
  EXPECT_THAT(sizes(chunk(x, 3, -1)), ElementsAre(3, 3, 1));
  EXPECT_THAT(sizes(chunk(Iota({1, 6}), 4, 1)), ElementsAre(2, 2, 2));
  EXPECT_FALSE(split(x, 0, 1).ok());
  EXPECT_FALSE(chunk(x, 0, 1).ok());
  absl::StatusOr<std::vector<Tensor>> parts = split(x, 3, 1);
  EXPECT_EQ(Values((*parts)[2]), (std::vector<double>{6, 13}));
}

TEST_F(ShapeOps, SplitRoutesEachPartsGradientAndZerosForUnusedParts) {
  Tensor x = Iota({2, 5});
  absl::StatusOr<std::vector<Tensor>> parts = split(x, 2, 1);  // 2, 2, 1
  ASSERT_TRUE(parts.ok()) << parts.status();
  // Parts 0 and 2 reach the loss (weights 100.. and 200..); part 1 does not.
  Tensor w0 = testing::MakeTensor(d_, {100, 101, 102, 103}, {2, 2});
  Tensor w2 = testing::MakeTensor(d_, {200, 201}, {2, 1});
  absl::StatusOr<Tensor> loss =
      add(*sum(*mul((*parts)[0], w0)), *sum(*mul((*parts)[2], w2)));
  ASSERT_TRUE(loss.ok()) << loss.status();
  ASSERT_TRUE(loss->backward().ok());
  EXPECT_EQ(Values(x.grad()),
            (std::vector<double>{100, 101, 0, 0, 200, 102, 103, 0, 0, 201}));
}

TEST_F(ShapeOps, CatJoinsAndRoutesGradientsBack) {
  Tensor a = Iota({2, 2}), b = Iota({2, 3});
  absl::StatusOr<Tensor> y = cat({a, b}, 1);
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_EQ(y->shape(), (Shape{2, 5}));
  EXPECT_EQ(Values(*y), (std::vector<double>{0, 1, 0, 1, 2, 2, 3, 3, 4, 5}));
  Backward(*y);
  EXPECT_EQ(Values(a.grad()), (std::vector<double>{100, 101, 105, 106}));
  EXPECT_EQ(Values(b.grad()),
            (std::vector<double>{102, 103, 104, 107, 108, 109}));
  EXPECT_THAT(cat({a, b}, 0).status().message(),
              HasSubstr("all must match except in dimension 0"));
  EXPECT_FALSE(cat({}, 0).ok());
}

TEST_F(ShapeOps, CatPromotesLikePyTorch) {
  Tensor h = Iota({2}, DType::kF16), f = Iota({3}), b = Iota({1}, DType::kBF16);
  // Outside autocast: PyTorch's result type.
  EXPECT_EQ(cat({h, h})->dtype(), DType::kF16);
  EXPECT_EQ(cat({h, f})->dtype(), DType::kF32);
  EXPECT_EQ(cat({h, b})->dtype(), DType::kF32);
  absl::StatusOr<Tensor> y = cat({h, f});
  Backward(*y);
  EXPECT_EQ(h.grad().dtype(), DType::kF16) << "grads keep the input's dtype";
  EXPECT_EQ(Values(h.grad()), (std::vector<double>{100, 101}));
  // Under autocast: the promote list (the widest input), as
  // at::autocast::promote_type; stack too.
  AutocastGuard autocast("cpu", DType::kBF16);
  EXPECT_EQ(cat({b, b})->dtype(), DType::kBF16);
  EXPECT_EQ(cat({b, f})->dtype(), DType::kF32);
  EXPECT_EQ(stack({b, b})->dtype(), DType::kBF16);
  EXPECT_THAT(cat({b, h}).status().message(),
              HasSubstr("Unexpected floating ScalarType"));
}

TEST_F(ShapeOps, StackAddsADimension) {
  Tensor a = Iota({2, 2}), b = Iota({2, 2});
  absl::StatusOr<Tensor> y = stack({a, b}, 1);
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_EQ(y->shape(), (Shape{2, 2, 2}));
  EXPECT_EQ(Values(*y), (std::vector<double>{0, 1, 0, 1, 2, 3, 2, 3}));
  Backward(*y);
  EXPECT_EQ(Values(a.grad()), (std::vector<double>{100, 101, 104, 105}));
  EXPECT_EQ(Values(b.grad()), (std::vector<double>{102, 103, 106, 107}));
  EXPECT_THAT(stack({a, Iota({2, 3})}).status().message(),
              HasSubstr("stack expects each tensor to be equal size"));
}

TEST_F(ShapeOps, CausalMaskWithTriuAndMaskedFill) {
  // The causal mask of attention: scores above the diagonal become -inf.
  Tensor scores = Iota({2, 3, 3});
  Tensor ones_ = *ones({3, 3}, DType::kF32, d_);
  absl::StatusOr<Tensor> upper = triu(ones_, 1);
  ASSERT_TRUE(upper.ok()) << upper.status();
  EXPECT_EQ(Values(*upper), (std::vector<double>{0, 1, 1, 0, 0, 1, 0, 0, 0}));
  absl::StatusOr<Tensor> mask =
      kernels::gt(*upper, *zeros({1}, DType::kF32, d_));
  ASSERT_TRUE(mask.ok()) << mask.status();
  absl::StatusOr<Tensor> y = masked_fill(scores, *mask, -INFINITY);
  ASSERT_TRUE(y.ok()) << y.status();
  const double inf = INFINITY;
  EXPECT_EQ(Values(*y),
            (std::vector<double>{0, -inf, -inf, 3, 4, -inf, 6, 7, 8, 9, -inf,
                                 -inf, 12, 13, -inf, 15, 16, 17}));
  Tensor w = testing::MakeTensor(d_, std::vector<float>(18, 1), {2, 3, 3});
  ASSERT_TRUE(sum(*mul(*masked_fill(scores, *mask, 0), w))->backward().ok());
  EXPECT_EQ(Values(scores.grad()),
            (std::vector<double>{1, 0, 0, 1, 1, 0, 1, 1, 1, 1, 0, 0, 1, 1, 0, 1,
                                 1, 1}));
  EXPECT_THAT(
      masked_fill(scores, *ones({3, 3}, DType::kF32, d_), 0).status().message(),
      HasSubstr("expected bool"));
  EXPECT_THAT(masked_fill(Iota({3}), *mask, 0).status().message(),
              HasSubstr("must broadcast to the input's shape"));
}

TEST_F(ShapeOps, TrilAndTriuWithOffsetsOnRectangles) {
  Tensor x = Iota({3, 4});
  absl::StatusOr<Tensor> lower = tril(x, -1);
  ASSERT_TRUE(lower.ok()) << lower.status();
  EXPECT_EQ(Values(*lower),
            (std::vector<double>{0, 0, 0, 0, 4, 0, 0, 0, 8, 9, 0, 0}));
  EXPECT_EQ(Values(triu(x, 2)),
            (std::vector<double>{0, 0, 2, 3, 0, 0, 0, 7, 0, 0, 0, 0}));
  Backward(*lower);
  EXPECT_EQ(Values(x.grad()),
            (std::vector<double>{0, 0, 0, 0, 104, 0, 0, 0, 108, 109, 0, 0}));
  EXPECT_THAT(triu(Iota({3}), 0).status().message(),
              HasSubstr("expected at least 2 dimensions"));
}

}  // namespace
}  // namespace mixrt
