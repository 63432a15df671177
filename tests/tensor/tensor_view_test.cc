// Views: shapes, strides and offsets, checked against index arithmetic done
// here on the host values of arange().
#include <vector>

#include "absl/status/statusor.h"
#include "core/tensor/factories.h"
#include "core/tensor/shape.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/test_plugins.h"

namespace mixrt {
namespace {

using ::testing::ElementsAre;
using ::testing::ElementsAreArray;
using ::testing::HasSubstr;

class TensorViewTest : public ::testing::Test {
 protected:
  void SetUp() override { device_ = testing::ReferenceDevice(); }

  // 0, 1, ..., n-1 as f32, in `shape`.
  Tensor Iota(std::vector<int64_t> shape) {
    int64_t n = 1;
    for (int64_t s : shape) n *= s;
    auto t = arange(0, n, 1, DType::kF32, device_);
    EXPECT_TRUE(t.ok()) << t.status();
    auto r = t->view(shape);
    EXPECT_TRUE(r.ok()) << r.status();
    return *r;
  }

  static std::vector<float> Values(const absl::StatusOr<Tensor>& t) {
    EXPECT_TRUE(t.ok()) << t.status();
    if (!t.ok()) return {};
    auto v = t->to_float_vector();
    EXPECT_TRUE(v.ok()) << v.status();
    return v.ok() ? *v : std::vector<float>{};
  }

  Device device_;
};

TEST_F(TensorViewTest, ContiguousStridesAndShapes) {
  Tensor t = Iota({2, 3, 4});
  EXPECT_THAT(t.shape(), ElementsAre(2, 3, 4));
  EXPECT_THAT(t.strides(), ElementsAre(12, 4, 1));
  EXPECT_TRUE(t.is_contiguous());
  EXPECT_EQ(t.numel(), 24);
}

TEST_F(TensorViewTest, TransposeIsAStridedView) {
  Tensor t = Iota({2, 3});
  auto tt = t.transpose(0, 1);
  ASSERT_TRUE(tt.ok());
  EXPECT_THAT(tt->shape(), ElementsAre(3, 2));
  EXPECT_THAT(tt->strides(), ElementsAre(1, 3));
  EXPECT_FALSE(tt->is_contiguous());
  EXPECT_TRUE(tt->shares_storage_with(t));
  EXPECT_THAT(Values(tt), ElementsAre(0, 3, 1, 4, 2, 5));
  EXPECT_THAT(Values(tt->contiguous()), ElementsAre(0, 3, 1, 4, 2, 5));
}

TEST_F(TensorViewTest, PermuteMatchesIndexArithmetic) {
  Tensor t = Iota({2, 3, 4});
  auto p = t.permute({2, 0, 1});
  ASSERT_TRUE(p.ok());
  EXPECT_THAT(p->shape(), ElementsAre(4, 2, 3));
  std::vector<float> expected;
  for (int k = 0; k < 4; ++k)
    for (int i = 0; i < 2; ++i)
      for (int j = 0; j < 3; ++j) expected.push_back(i * 12 + j * 4 + k);
  EXPECT_THAT(Values(p), ElementsAreArray(expected));
  EXPECT_THAT(t.permute({0, 0, 1}).status().message(), HasSubstr("repeats"));
}

TEST_F(TensorViewTest, SliceWithStepAndNegativeBounds) {
  Tensor t = Iota({10});
  EXPECT_THAT(Values(t.slice(0, 1, 8, 3)), ElementsAre(1, 4, 7));
  EXPECT_THAT(Values(t.slice(0, -3, 100)), ElementsAre(7, 8, 9));
  EXPECT_THAT(Values(t.slice(0, 5, 2)), ElementsAre());
  Tensor m = Iota({3, 4});
  auto col = m.slice(1, 2, 3);
  ASSERT_TRUE(col.ok());
  EXPECT_EQ(col->offset(), 2);
  EXPECT_THAT(Values(col), ElementsAre(2, 6, 10));
  EXPECT_THAT(t.slice(0, 0, 5, 0).status().message(), HasSubstr("step"));
}

TEST_F(TensorViewTest, ExpandBroadcastsWithStrideZero) {
  Tensor row = Iota({1, 3});
  auto e = row.expand({4, 2, 3});
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_THAT(e->strides(), ElementsAre(0, 0, 1));
  EXPECT_THAT(Values(e), ElementsAreArray(std::vector<float>{
                             0, 1, 2, 0, 1, 2, 0, 1, 2, 0, 1, 2,
                             0, 1, 2, 0, 1, 2, 0, 1, 2, 0, 1, 2}));
  auto bad = Iota({2, 3}).expand({4, 3});
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr("size 2 is not 1"));
}

TEST_F(TensorViewTest, ViewAndReshape) {
  Tensor t = Iota({2, 3, 4});
  auto v = t.view({6, -1});
  ASSERT_TRUE(v.ok());
  EXPECT_THAT(v->shape(), ElementsAre(6, 4));
  EXPECT_TRUE(v->shares_storage_with(t));

  // A transposed tensor cannot be flattened without a copy.
  auto tt = t.transpose(1, 2);
  ASSERT_TRUE(tt.ok());
  auto flat_view = tt->view({24});
  ASSERT_FALSE(flat_view.ok());
  EXPECT_THAT(flat_view.status().message(), HasSubstr("use reshape()"));
  auto flat = tt->reshape({24});
  ASSERT_TRUE(flat.ok());
  EXPECT_FALSE(flat->shares_storage_with(t));
  std::vector<float> expected;
  for (int i = 0; i < 2; ++i)
    for (int k = 0; k < 4; ++k)
      for (int j = 0; j < 3; ++j) expected.push_back(i * 12 + j * 4 + k);
  EXPECT_THAT(Values(flat), ElementsAreArray(expected));

  // Merging only the untouched leading dims is still a view.
  auto partial = tt->view({2, 4, 3});
  EXPECT_TRUE(partial.ok());

  EXPECT_THAT(t.view({5, -1}).status().message(),
              HasSubstr("invalid for 24 elements"));
  EXPECT_THAT(t.view({-1, -1}).status().message(),
              HasSubstr("only one dimension can be -1"));
  EXPECT_THAT(t.view({7, 3}).status().message(), HasSubstr("has 21 elements"));
}

TEST_F(TensorViewTest, ZeroAndOneElementTensors) {
  auto empty_t = zeros({0, 3}, DType::kF32, device_);
  ASSERT_TRUE(empty_t.ok());
  EXPECT_EQ(empty_t->numel(), 0);
  EXPECT_THAT(Values(empty_t->reshape({3, 0})), ElementsAre());
  EXPECT_EQ(empty_t->ToString(), "tensor([], dtype=f32, device=reference:0)");

  auto scalar = full({}, 2.5, DType::kF32, device_);
  ASSERT_TRUE(scalar.ok());
  EXPECT_EQ(scalar->ndim(), 0);
  EXPECT_EQ(*scalar->item(), 2.5);
  auto as_1 = scalar->view({1, 1});
  ASSERT_TRUE(as_1.ok()) << as_1.status();
  EXPECT_EQ(*as_1->item(), 2.5);
  EXPECT_THAT(Iota({2}).item().status().message(),
              HasSubstr("2 elements (shape [2]) cannot be converted"));
}

TEST_F(TensorViewTest, DimensionErrorsNameTheRange) {
  Tensor t = Iota({2, 3});
  EXPECT_THAT(
      t.transpose(0, 2).status().message(),
      HasSubstr("dimension 2 out of range: expected a value in [-2, 1]"));
  EXPECT_TRUE(t.transpose(-1, -2).ok());
}

TEST(Shape, BroadcastRulesAndErrors) {
  auto s = BroadcastShapes({3, 1, 5}, {4, 1}, "add");
  ASSERT_TRUE(s.ok());
  EXPECT_THAT(*s, ElementsAre(3, 4, 5));
  auto bad = BroadcastShapes({2, 3}, {4}, "add");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(),
            "add: shapes [2, 3] and [4] cannot be broadcast (dimension -1: 3 "
            "vs 4)");
  EXPECT_FALSE(CheckedNumElements({int64_t{1} << 40, int64_t{1} << 40}).ok());
  EXPECT_FALSE(CheckedNumElements({1, 1, 1, 1, 1, 1, 1, 1, 1}).ok());
  EXPECT_FALSE(CheckedNumElements({-1}).ok());
}

TEST_F(TensorViewTest, PrintsLikePyTorch) {
  Tensor t = Iota({2, 2});
  EXPECT_EQ(t.ToString(),
            "tensor([[0, 1], [2, 3]], dtype=f32, device=reference:0)");
  auto big = zeros({2000}, DType::kI32, device_);
  ASSERT_TRUE(big.ok());
  EXPECT_EQ(big->ToString(),
            "tensor([0, 0, 0, ..., 0, 0, 0], dtype=i32, device=reference:0)");
}

}  // namespace
}  // namespace mixrt
