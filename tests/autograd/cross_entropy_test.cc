// cross_entropy beyond the fused kernel: class weights with ignore_index
// and label smoothing, probability targets, [N, C, d...] inputs. Expected
// values are PyTorch 2.15's F.cross_entropy on the same inputs in float64
// (computed by hand, 2026-11-27); mixrt computes in f32: 2e-6 covers f32
// rounding of sums of a few terms of magnitude <= 5.
#include <vector>

#include "core/functional/ops.h"
#include "core/tensor/factories.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/op_test_util.h"
#include "tests/testing/test_plugins.h"

namespace mixrt {
namespace {

using testing::ExpectClose;
using ::testing::HasSubstr;
using testing::MakeTensor;
using testing::Values;

class CrossEntropy : public ::testing::Test {
 protected:
  void SetUp() override { d_ = testing::ReferenceDevice(); }
  Tensor Logits() {
    return MakeTensor(
        d_, {0.5, -1.0, 2.0, 1.5, 0.25, -0.5, -2.0, 0.0, 1.0, 0.3, 0.7, -0.1},
        {4, 3});
  }
  Tensor Targets() { return *from_ints({2, 1, 0, 1}, {4}, DType::kI64, d_); }
  Tensor Weight() { return MakeTensor(d_, {0.5, 2.0, 1.5}, {3}); }
  Device d_;
};

TEST_F(CrossEntropy, ClassWeightsWithIgnoreIndexAndSmoothing) {
  struct Want {
    Reduction reduction;
    double smoothing;
    std::vector<double> values;
  };
  const Want wants[] = {
      {Reduction::kMean, 0.0, {1.0182365266849145}},
      {Reduction::kMean, 0.2, {1.2349656898046442}},
      {Reduction::kSum, 0.0, {2.036473053369829}},
      {Reduction::kSum, 0.2, {2.4699313796092883}},
      {Reduction::kNone, 0.0, {0.36196694498573556, 0, 1.6745061083840933, 0}},
      {Reduction::kNone, 0.2, {0.8039232350971637, 0, 1.6660081445121244, 0}},
  };
  for (const Want& w : wants) {
    CrossEntropyOptions o;
    o.weight = Weight();
    o.ignore_index = 1;
    o.label_smoothing = w.smoothing;
    o.reduction = w.reduction;
    auto loss = cross_entropy(Logits(), Targets(), o);
    ASSERT_TRUE(loss.ok()) << loss.status();
    ExpectClose(Values(loss), w.values, 2e-6, 0, "weighted cross_entropy");
  }
  // The gradient of the smoothed, weighted mean (PyTorch's, float64).
  Tensor logits = Logits();
  ASSERT_TRUE(logits.set_requires_grad(true).ok());
  CrossEntropyOptions o;
  o.weight = Weight();
  o.ignore_index = 1;
  o.label_smoothing = 0.2;
  auto loss = cross_entropy(logits, Targets(), o);
  ASSERT_TRUE(loss.ok());
  ASSERT_TRUE(loss->backward().ok());
  ExpectClose(
      Values(logits.grad()),
      {0.1118796209026936, -0.037984112934829194, -0.07389550796786436, 0, 0, 0,
       -0.20496032434688677, 0.019832153447473022, 0.1851281708994137, 0, 0, 0},
      2e-6, 0, "weighted cross_entropy gradient");
}

TEST_F(CrossEntropy, ProbabilityTargets) {
  Tensor q = MakeTensor(
      d_, {1.0, -1.0, 0.5, 0.0, 0.2, 0.1, -0.3, 2.0, -1.0, -2.0, 0.0, 1.0},
      {3, 4});
  Tensor p = MakeTensor(
      d_, {0.1, 0.2, 0.3, 0.4, 0, 1, 0, 0, 0.25, 0.25, 0.25, 0.25}, {3, 4});
  CrossEntropyOptions o;
  o.weight = MakeTensor(d_, {1.0, 0.5, 2.0, 1.0}, {4});
  o.label_smoothing = 0.1;
  o.reduction = Reduction::kMean;
  ExpectClose(Values(cross_entropy(q, p, o)), {1.6265184887690556}, 2e-6, 0,
              "mean");
  o.reduction = Reduction::kSum;
  ExpectClose(Values(cross_entropy(q, p, o)), {4.879555466307167}, 4e-6, 0,
              "sum");
  o.reduction = Reduction::kNone;
  ExpectClose(Values(cross_entropy(q, p, o)),
              {1.7752814684897462, 1.2340605869360763, 1.8702134108813449},
              2e-6, 0, "none");
  EXPECT_THAT(cross_entropy(q, MakeTensor(d_, {0.5, 0.5}, {1, 2}), o)
                  .status()
                  .message(),
              HasSubstr("probability target [1, 2] does not match input"));
}

TEST_F(CrossEntropy, SpatialInputsFlattenTheirPositions) {
  // [N=2, C=3, d=2] logits, [2, 2] targets.
  Tensor x = MakeTensor(
      d_, {0.5, 1.0, -1.0, 0.0, 2.0, 0.5, 1.5, -0.5, 0.25, 0.75, -0.5, 0.0},
      {2, 3, 2});
  Tensor t = *from_ints({2, 0, 1, 1}, {2, 2}, DType::kI64, d_);
  CrossEntropyOptions o;
  ExpectClose(Values(cross_entropy(x, t, o)), {0.7720512889522455}, 2e-6, 0,
              "spatial mean");
  o.reduction = Reduction::kNone;
  auto none = cross_entropy(x, t, o);
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_EQ(none->shape(), Shape({2, 2}));
  ExpectClose(Values(none),
              {0.24131129665715703, 0.6802696706417346, 1.6019518638028019,
               0.5646723247072887},
              2e-6, 0, "spatial none");
  o.weight = Weight();
  o.reduction = Reduction::kMean;
  ExpectClose(Values(cross_entropy(x, t, o)), {0.8392250262211308}, 2e-6, 0,
              "spatial weighted mean");
  EXPECT_THAT(cross_entropy(x, *from_ints({0, 1}, {2}, DType::kI64, d_), o)
                  .status()
                  .message(),
              HasSubstr("expected [2, 2] class indices"));
}

TEST_F(CrossEntropy, BadWeightsAndTargetsAreRefused) {
  CrossEntropyOptions o;
  o.weight = MakeTensor(d_, {1, 2}, {2});
  EXPECT_THAT(cross_entropy(Logits(), Targets(), o).status().message(),
              HasSubstr("expected a floating tensor of 3 class weights"));
  o.weight = Weight();
  EXPECT_THAT(
      cross_entropy(Logits(), *from_ints({0, 5, 1, 2}, {4}, DType::kI64, d_), o)
          .status()
          .message(),
      HasSubstr("target 5 is out of bounds for 3 classes"));
}

}  // namespace
}  // namespace mixrt
