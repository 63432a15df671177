// Tensor::register_post_accumulate_grad_hook and QueueBackwardCallback, the
// two engine hooks DistributedDataParallel is built on.
#include <vector>

#include "absl/status/status.h"
#include "core/autograd/engine.h"
#include "core/functional/ops.h"
#include "core/tensor/factories.h"
#include "gtest/gtest.h"
#include "tests/testing/test_plugins.h"

namespace mixrt {
namespace {

Tensor Leaf(std::vector<float> v) {
  Tensor t = *from_floats(v, {static_cast<int64_t>(v.size())}, DType::kF32,
                          testing::ReferenceDevice());
  EXPECT_TRUE(t.set_requires_grad(true).ok());
  return t;
}

TEST(BackwardHooksTest, PostAccumulateGradHookSeesTheAccumulatedGrad) {
  Tensor w = Leaf({1, 2});
  std::vector<std::vector<float>> seen;
  auto id = w.register_post_accumulate_grad_hook([&](const Tensor& g) {
    seen.push_back(*g.to_float_vector());
    return absl::OkStatus();
  });
  ASSERT_TRUE(id.ok());
  // d/dw sum(3 w) = 3, twice: the second call sees the sum, 6.
  for (int i = 0; i < 2; ++i) {
    Tensor y = *sum(*mul(w, *full({2}, 3.0, DType::kF32, w.device())));
    ASSERT_TRUE(y.backward().ok());
  }
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_EQ(seen[0], (std::vector<float>{3, 3}));
  EXPECT_EQ(seen[1], (std::vector<float>{6, 6}));
  w.remove_post_accumulate_grad_hook(*id);
  ASSERT_TRUE((*sum(w)).backward().ok());
  EXPECT_EQ(seen.size(), 2u) << "a removed hook must not run";
}

TEST(BackwardHooksTest, AHookErrorFailsTheBackward) {
  Tensor w = Leaf({1});
  ASSERT_TRUE(w.register_post_accumulate_grad_hook([](const Tensor&) {
                 return absl::DataLossError("hook says no");
               }).ok());
  const absl::Status s = (*sum(w)).backward();
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
}

TEST(BackwardHooksTest, OnlyLeavesThatRequireGradTakeHooks) {
  Tensor plain = *zeros({2}, DType::kF32, testing::ReferenceDevice());
  auto none = [](const Tensor&) { return absl::OkStatus(); };
  EXPECT_EQ(plain.register_post_accumulate_grad_hook(none).status().code(),
            absl::StatusCode::kFailedPrecondition);
  Tensor w = Leaf({1, 2});
  Tensor inner = *mul(w, w);
  EXPECT_FALSE(inner.register_post_accumulate_grad_hook(none).ok());
}

TEST(BackwardHooksTest, QueuedCallbacksRunAfterEveryNodeInOrder) {
  Tensor a = Leaf({1}), b = Leaf({2});
  std::vector<std::string> order;
  bool queued = false;
  auto hook = [&](const char* name) {
    return [&, name](const Tensor&) -> absl::Status {
      order.push_back(name);
      if (queued) return absl::OkStatus();
      queued = true;
      // Queued from the first hook, run after the last one; a callback
      // may queue another.
      return QueueBackwardCallback([&] {
        order.push_back("end");
        return QueueBackwardCallback([&] {
          order.push_back("after end");
          return absl::OkStatus();
        });
      });
    };
  };
  ASSERT_TRUE(a.register_post_accumulate_grad_hook(hook("a")).ok());
  ASSERT_TRUE(b.register_post_accumulate_grad_hook(hook("b")).ok());
  ASSERT_TRUE((*sum(*mul(a, b))).backward().ok());
  ASSERT_EQ(order.size(), 4u);
  EXPECT_EQ(order[2], "end");
  EXPECT_EQ(order[3], "after end");
  // Outside a backward there is nothing to queue on.
  EXPECT_EQ(QueueBackwardCallback([] { return absl::OkStatus(); }).code(),
            absl::StatusCode::kFailedPrecondition);
}

TEST(BackwardHooksTest, ACallbackErrorFailsTheBackward) {
  Tensor a = Leaf({1});
  ASSERT_TRUE(a.register_post_accumulate_grad_hook([](const Tensor&) {
                 return QueueBackwardCallback(
                     [] { return absl::AbortedError("callback failed"); });
               }).ok());
  EXPECT_EQ((*sum(a)).backward().code(), absl::StatusCode::kAborted);
}

}  // namespace
}  // namespace mixrt
