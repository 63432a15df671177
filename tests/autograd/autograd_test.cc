// Reverse-mode autograd over the mixrt:: ops: every op's gradient against
// central finite differences of its forward, plus the engine's semantics
// (accumulation, retain_graph, no_grad, detach, dtypes, threads).
#include <functional>
#include <memory>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "core/amp/autocast/autocast.h"
#include "core/autograd/function_node.h"
#include "core/autograd/grad_mode.h"
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
using testing::Values;

using Fn = std::function<absl::StatusOr<Tensor>(const std::vector<Tensor>&)>;

class AutogradTest : public ::testing::Test {
 protected:
  void SetUp() override { device_ = testing::ReferenceDevice(); }

  // Leaves with `values` in `shapes`.
  std::vector<Tensor> Leaves(const std::vector<std::vector<float>>& values,
                             const std::vector<std::vector<int64_t>>& shapes,
                             bool requires_grad) {
    std::vector<Tensor> out;
    for (size_t i = 0; i < values.size(); ++i) {
      Tensor t = testing::MakeTensor(device_, values[i], shapes[i]);
      EXPECT_TRUE(t.set_requires_grad(requires_grad).ok());
      out.push_back(t);
    }
    return out;
  }

  // d f / d leaf_i by autograd against central differences.
  void CheckGradients(const std::vector<std::vector<int64_t>>& shapes,
                      const Fn& f, uint64_t seed, double h = 1e-2,
                      double tol = 3e-3) {
    std::vector<std::vector<float>> values;
    for (size_t i = 0; i < shapes.size(); ++i) {
      int64_t n = 1;
      for (int64_t s : shapes[i]) n *= s;
      values.push_back(testing::RandomValues(n, seed + i));
    }
    std::vector<Tensor> leaves = Leaves(values, shapes, true);
    auto y = f(leaves);
    ASSERT_TRUE(y.ok()) << y.status();
    ASSERT_TRUE(y->requires_grad());
    ASSERT_TRUE(y->backward().ok());
    auto eval = [&](const std::vector<std::vector<float>>& v) {
      NoGradGuard no_grad;
      auto r = f(Leaves(v, shapes, false));
      EXPECT_TRUE(r.ok()) << r.status();
      return r.ok() ? *r->item() : 0.0;
    };
    for (size_t i = 0; i < shapes.size(); ++i) {
      std::vector<double> numeric(values[i].size());
      for (size_t j = 0; j < values[i].size(); ++j) {
        auto up = values, down = values;
        up[i][j] += h;
        down[i][j] -= h;
        numeric[j] = (eval(up) - eval(down)) / (2 * h);
      }
      ASSERT_TRUE(leaves[i].grad().defined()) << "input " << i;
      EXPECT_EQ(leaves[i].grad().dtype(), DType::kF32);
      ExpectClose(Values(leaves[i].grad()), numeric, tol, tol,
                  absl::StrCat("d/d input ", i));
    }
  }

  Device device_;
};

TEST_F(AutogradTest, BroadcastingArithmetic) {
  CheckGradients(
      {{3, 4}, {4}, {3, 1}},
      [](const std::vector<Tensor>& p) {
        auto a = add(p[0], p[1]);
        auto m = mul(*a, p[2]);
        auto s = sub(*m, p[1]);
        auto d = div(*s, *scale(*exp(p[2]), 1.0, 2.0));
        return sum(*d);
      },
      1);
}

TEST_F(AutogradTest, UnaryOpsAndReductions) {
  CheckGradients(
      {{2, 5}},
      [](const std::vector<Tensor>& p) {
        auto g = gelu(p[0]);
        auto t = tanh(*g);
        auto s = sigmoid(*silu(*t));
        auto c = clamp(*mul(*s, p[0]), -0.5, 0.8);
        return mean(*c);
      },
      2);
}

TEST_F(AutogradTest, LinearMlpWithMseLoss) {
  const Tensor target =
      testing::MakeTensor(device_, testing::RandomValues(8, 30), {4, 2});
  CheckGradients(
      {{4, 3}, {5, 3}, {5}, {2, 5}, {2}},
      [&](const std::vector<Tensor>& p) {
        auto h = relu(*linear(p[0], p[1], p[2]));
        auto y = linear(*h, p[3], p[4]);
        return mse_loss(*y, target);
      },
      3);
}

TEST_F(AutogradTest, BatchedMatmulSoftmaxAndLayerNorm) {
  CheckGradients(
      {{2, 3, 4}, {4, 5}, {5}, {5}},
      [](const std::vector<Tensor>& p) {
        auto m = matmul(p[0], p[1]);
        auto n = layer_norm(*m, 1, p[2], p[3]);
        auto s = log_softmax(*n, -1);
        auto t = softmax(*transpose(*s, 0, 1), 0);
        return sum(*mul(*t, *reshape(*s, {3, 2, 5})));
      },
      4);
}

TEST_F(AutogradTest, CrossEntropy) {
  auto target = from_ints({2, 0, 1}, {3}, DType::kI64, device_);
  ASSERT_TRUE(target.ok());
  CheckGradients(
      {{3, 4}},
      [&](const std::vector<Tensor>& p) {
        CrossEntropyOptions o;
        o.label_smoothing = 0.1;
        return cross_entropy(p[0], *target, o);
      },
      5);
}

TEST_F(AutogradTest, ConvPoolBatchNorm) {
  auto rm = zeros({3}, DType::kF32, device_);
  auto rv = ones({3}, DType::kF32, device_);
  ASSERT_TRUE(rm.ok() && rv.ok());
  CheckGradients(
      {{2, 2, 5, 5}, {3, 2, 3, 3}, {3}, {3}, {3}},
      [&](const std::vector<Tensor>& p) {
        Conv2dOptions co;
        co.padding = {1, 1};
        auto c = conv2d(p[0], p[1], p[2], co);
        auto b = batch_norm(*c, p[3], p[4], *rm, *rv, true);
        Pool2dOptions po;
        po.kind = MIXRT_POOL_AVG;
        auto q = pool2d(*b, po);
        return sum(*mul(*q, *q));
      },
      6, 1e-2, 5e-3);
}

TEST_F(AutogradTest, EmbeddingScatterAddsIntoTheTable) {
  auto idx = from_ints({1, 3, 1}, {3}, DType::kI64, device_);
  ASSERT_TRUE(idx.ok());
  CheckGradients(
      {{4, 2}},
      [&](const std::vector<Tensor>& p) {
        auto e = embedding(p[0], *idx);
        return sum(*mul(*e, *e));
      },
      7);
}

// padding_idx means what it means in PyTorch: unset is no padding, -1 the
// last row (which then gets no gradient), out of range an error.
TEST_F(AutogradTest, EmbeddingPaddingIdxCountsFromTheEndAsInPyTorch) {
  auto idx = from_ints({1, 3, 1, 0}, {4}, DType::kI64, device_);
  ASSERT_TRUE(idx.ok());
  auto row_sums = [&](std::optional<int64_t> padding) {
    Tensor w = Leaves({std::vector<float>(8, 1.0f)}, {{4, 2}}, true)[0];
    auto e = embedding(w, *idx, padding);
    EXPECT_TRUE(e.ok()) << e.status();
    EXPECT_TRUE(sum(*e)->backward().ok());
    std::vector<double> g = Values(w.grad());
    return std::vector<double>{g[0], g[2], g[4], g[6]};
  };
  EXPECT_THAT(row_sums(std::nullopt), ::testing::ElementsAre(1, 2, 0, 1));
  EXPECT_THAT(row_sums(-1), ::testing::ElementsAre(1, 2, 0, 0));
  EXPECT_THAT(row_sums(-4), ::testing::ElementsAre(0, 2, 0, 1));
  EXPECT_THAT(row_sums(1), ::testing::ElementsAre(1, 0, 0, 1));
  Tensor w = Leaves({std::vector<float>(8, 1.0f)}, {{4, 2}}, true)[0];
  for (int64_t bad : {4, -5}) {
    EXPECT_THAT(embedding(w, *idx, bad).status().message(),
                ::testing::HasSubstr("expected -4 <= padding_idx < 4"));
  }
}

TEST_F(AutogradTest, GradientsAccumulateUntilReset) {
  auto x = Leaves({{1, 2}}, {{2}}, true)[0];
  for (int i = 0; i < 2; ++i) {
    auto y = sum(*mul(x, x));
    ASSERT_TRUE(y->backward().ok());
  }
  EXPECT_THAT(Values(x.grad()), ::testing::ElementsAre(4, 8));  // 2 * 2x
  x.set_grad(Tensor());  // zero_grad(set_to_none=True)
  ASSERT_TRUE(sum(x)->backward().ok());
  EXPECT_THAT(Values(x.grad()), ::testing::ElementsAre(1, 1));
}

// Like a PyTorch tensor object: every handle to one tensor sees what another
// learns, whenever it was copied; views and detach() are other tensors.
TEST_F(AutogradTest, HandlesToOneTensorShareTheirAutogradState) {
  Tensor a = Leaves({{1, 2}}, {{2}}, false)[0];
  Tensor b = a;  // Copied before a requires grad.
  std::vector<Tensor> params = {a};
  ASSERT_TRUE(a.set_requires_grad(true).ok());
  EXPECT_TRUE(b.requires_grad());
  EXPECT_TRUE(params[0].requires_grad());
  EXPECT_TRUE(a.is_same(b));
  ASSERT_TRUE(sum(*mul(b, b))->backward().ok());
  EXPECT_THAT(Values(a.grad()), ::testing::ElementsAre(2, 4));
  EXPECT_THAT(Values(params[0].grad()), ::testing::ElementsAre(2, 4));
  params[0].set_grad(Tensor());  // An optimizer's zero_grad, through a copy.
  EXPECT_FALSE(a.grad().defined());
  const Tensor d = a.detach();
  EXPECT_FALSE(d.requires_grad());
  EXPECT_TRUE(d.shares_storage_with(a));
  EXPECT_FALSE(d.is_same(a));
  EXPECT_FALSE((*a.reshape({2, 1})).requires_grad());
}

TEST_F(AutogradTest, SecondBackwardNeedsRetainGraph) {
  auto x = Leaves({{3}}, {{1}}, true)[0];
  auto y = sum(*mul(x, x));
  ASSERT_TRUE(y->backward(Tensor(), /*retain_graph=*/true).ok());
  ASSERT_TRUE(y->backward().ok());
  EXPECT_THAT(Values(x.grad()), ::testing::ElementsAre(12));
  absl::Status again = y->backward();
  ASSERT_FALSE(again.ok());
  EXPECT_THAT(again.message(),
              HasSubstr("backward through the graph a second time"));
  EXPECT_THAT(again.message(), HasSubstr("retain_graph=true"));
}

TEST_F(AutogradTest, SavedTensorsAreFreedAsSoonAsTheirNodeHasRun) {
  // x -> First -> h -> Second (saves `big`) -> y. Backward runs Second,
  // then First: by then Second's saved tensor must be gone, not kept until
  // the whole backward ends.
  auto x = Leaves({{1, 2, 3, 4}}, {{4}}, true)[0];
  std::weak_ptr<Storage> big_storage;
  bool freed_before_first_ran = false;
  Tensor h = *x.to(DType::kF32);
  h = h.detach();
  Record(
      "First", {x}, {&h}, {},
      [&](const std::vector<Tensor>& g,
          const std::vector<Tensor>&) -> absl::StatusOr<std::vector<Tensor>> {
        freed_before_first_ran = big_storage.expired();
        return std::vector<Tensor>{g[0]};
      });
  Tensor y = h.detach();
  {
    absl::StatusOr<Tensor> big = zeros({1 << 16}, DType::kF32, x.device());
    ASSERT_TRUE(big.ok());
    big_storage = big->storage();
    Record(
        "Second", {h}, {&y}, {*big},
        [](const std::vector<Tensor>& g,
           const std::vector<Tensor>&) -> absl::StatusOr<std::vector<Tensor>> {
          return std::vector<Tensor>{g[0]};
        });
  }
  ASSERT_FALSE(big_storage.expired());  // Held by Second until it runs.
  ASSERT_TRUE(sum(y)->backward().ok());
  EXPECT_TRUE(freed_before_first_ran);
  EXPECT_THAT(Values(x.grad()), ::testing::ElementsAre(1, 1, 1, 1));
}

TEST_F(AutogradTest, NoGradDetachAndErrors) {
  auto x = Leaves({{1, 2}}, {{2}}, true)[0];
  {
    NoGradGuard no_grad;
    EXPECT_FALSE(relu(x)->requires_grad());
  }
  {
    InferenceModeGuard inference;
    EXPECT_FALSE(GradModeEnabled());
    EXPECT_TRUE(InferenceModeEnabled());
  }
  EXPECT_TRUE(GradModeEnabled());
  EXPECT_FALSE(mul(x, x)->detach().requires_grad());
  auto v = sum(*mul(x.detach(), x.detach()));
  EXPECT_THAT(v->backward().message(), HasSubstr("does not require grad"));
  EXPECT_THAT(mul(x, x)->backward().message(),
              HasSubstr("only for scalar outputs"));
  auto i = from_ints({1}, {1}, DType::kI64, device_);
  EXPECT_THAT(i->set_requires_grad(true).message(),
              HasSubstr("only floating tensors"));
}

TEST_F(AutogradTest, GradModeIsPerThread) {
  NoGradGuard off_here;
  bool other_thread_enabled = false;
  std::thread t([&] { other_thread_enabled = GradModeEnabled(); });
  t.join();
  EXPECT_TRUE(other_thread_enabled);
  EXPECT_FALSE(GradModeEnabled());
}

TEST_F(AutogradTest, LowerPrecisionForwardGivesF32LeafGradients) {
  // Under autocast, linear runs in bf16; the f32 leaves still get f32 grads
  // close to the f32 ones (bf16 has 8 significant bits).
  auto p = Leaves({testing::RandomValues(12, 8), testing::RandomValues(6, 9)},
                  {{4, 3}, {2, 3}}, true);
  auto f32 = sum(*linear(p[0], p[1], Tensor()));
  ASSERT_TRUE(f32->backward().ok());
  const std::vector<double> want = Values(p[1].grad());
  p[1].set_grad(Tensor());
  {
    AutocastGuard autocast("cpu", DType::kBF16);
    auto y = linear(p[0], p[1], Tensor());
    ASSERT_TRUE(y.ok());
    EXPECT_EQ(y->dtype(), DType::kBF16);
    ASSERT_TRUE(sum(*y)->backward().ok());
  }
  EXPECT_EQ(p[1].grad().dtype(), DType::kF32);
  ExpectClose(Values(p[1].grad()), want, 2 * std::ldexp(1.0, -8), 1e-2,
              "bf16 weight gradient");
}

}  // namespace
}  // namespace mixrt

namespace mixrt {
namespace {

TEST_F(AutogradTest, MoreUnaryOpsAndLosses) {
  CheckGradients(
      {{2, 3}},
      [](const std::vector<Tensor>& p) {
        auto pos = scale(*exp(p[0]), 1.0, 0.5);  // > 0 for log, sqrt, pow
        auto a = leaky_relu(p[0], 0.1);
        auto b = mul(*log(*pos), *sqrt(*pos));
        auto c = add(*pow(*pos, 1.5), *neg(*a));
        return sum(*mul(*b, *flatten(*c)));
      },
      20);
  auto target = testing::MakeTensor(
      device_, {0.2f, 0.9f, 0.5f, 0.1f, 0.7f, 0.3f}, {2, 3});
  auto labels = from_ints({2, 0}, {2}, DType::kI64, device_);
  ASSERT_TRUE(labels.ok());
  CheckGradients(
      {{2, 3}},
      [&](const std::vector<Tensor>& p) {
        auto l1 = l1_loss(p[0], target);
        auto sl1 = smooth_l1_loss(p[0], target, Reduction::kSum, 0.5);
        auto bce = binary_cross_entropy_with_logits(p[0], target);
        auto nll = nll_loss(*log_softmax(p[0], 1), *labels);
        return add(*add(*l1, *sl1), *add(*bce, *nll));
      },
      21, 1e-3, 5e-3);
}

TEST_F(AutogradTest, MaxPoolRoutesGradientsToTheMaximum) {
  CheckGradients(
      {{1, 2, 4, 4}},
      [](const std::vector<Tensor>& p) {
        Pool2dOptions o;  // 2x2 max, stride 2
        return sum(*mul(*pool2d(p[0], o), *pool2d(p[0], o)));
      },
      22);
}

}  // namespace
}  // namespace mixrt
