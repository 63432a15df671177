// Many threads, each with its own autocast and grad-mode state, run forward
// passes on one shared (read-only) model while others query the registry;
// every thread gets the results its own state asks for.
#include <atomic>
#include <thread>
#include <vector>

#include "core/amp/autocast/autocast.h"
#include "core/autograd/grad_mode.h"
#include "core/functional/ops.h"
#include "core/nn/module.h"
#include "core/plugin/registry.h"
#include "core/tensor/factories.h"
#include "gtest/gtest.h"
#include "tests/testing/test_plugins.h"

namespace mixrt {
namespace {

TEST(Concurrency, PerThreadStateOnASharedModel) {
  auto backend = Registry::Global().Load(
      testing::RunfilePath("backends/cpu/libmixrt_cpu.so"));
  ASSERT_TRUE(backend.ok()) << backend.status();
  const Device d(*backend, 0);
  Generator g(0);
  auto model = *nn::MLP({32, 64, 16}, d, &g);
  auto x = *randn({8, 32}, DType::kF32, d, 0, 1, &g);
  std::vector<double> f32_ref, bf16_ref;
  {
    NoGradGuard no_grad;
    f32_ref = *model->forward(x)->to_double_vector();
    AutocastGuard autocast("cpu", DType::kBF16);
    bf16_ref = *model->forward(x)->to_double_vector();
  }
  std::atomic<int> grad_mismatches{0}, dtype_mismatches{0}, value_mismatches{0},
      errors{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      const bool amp = t % 2 == 0;
      const bool grad = t % 3 == 0;
      for (int i = 0; i < 20; ++i) {
        std::unique_ptr<NoGradGuard> no_grad;
        if (!grad) no_grad = std::make_unique<NoGradGuard>();
        AutocastGuard autocast("cpu", DType::kBF16, amp);
        auto y = model->forward(x);
        if (!y.ok()) {
          ++errors;
          continue;
        }
        if (y->requires_grad() != grad) ++grad_mismatches;
        if ((y->dtype() == DType::kBF16) != amp) ++dtype_mismatches;
        if (*y->to_double_vector() != (amp ? bf16_ref : f32_ref)) {
          ++value_mismatches;
        }
      }
    });
  }
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 200; ++i) {
        if (Registry::Global().Reports().empty()) ++errors;
        if (!Registry::Global().SelectDevice("cpu").ok()) ++errors;
      }
    });
  }
  for (std::thread& th : threads) th.join();
  EXPECT_EQ(errors.load(), 0);
  EXPECT_EQ(grad_mismatches.load(), 0);
  EXPECT_EQ(dtype_mismatches.load(), 0);
  EXPECT_EQ(value_mismatches.load(), 0);
}

}  // namespace
}  // namespace mixrt
