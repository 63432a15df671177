// Compiled training on partial plugins (tests/fixtures/partial_*): ops a
// plugin leaves out run on a fallback backend, which a graph of the
// plugin's launches cannot replay. Compiled training must learn exactly
// what eager training learns on that plugin, in every mode, whether the
// missing op is in the forward or only in the backward, and say why the
// graph was not used. Eager training on the partial plugins matches the
// reference plugin's (the same kernels, whichever backend ran each op).
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "core/compiler/compile.h"
#include "core/functional/ops.h"
#include "core/optim/optimizer.h"
#include "core/plugin/registry.h"
#include "core/tensor/factories.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "mixrt/status_macros.h"
#include "tests/testing/test_plugins.h"

namespace mixrt {
namespace {

using ::testing::HasSubstr;

Device Load(const std::string& name) {
  auto backend = Registry::Global().Load(
      testing::RunfilePath("tests/fixtures/libmixrt_" + name + ".so"));
  EXPECT_TRUE(backend.ok()) << backend.status();
  return backend.ok() ? Device(*backend, 0) : Device();
}

// Linear, ReLU, Linear and the cross entropy, with parameters of its own.
struct Model {
  std::vector<Tensor> params;
  explicit Model(const Device& d) {
    Generator g(5);
    for (std::vector<int64_t> shape :
         {std::vector<int64_t>{24, 16}, {24}, {6, 24}, {6}}) {
      params.push_back(*randn(shape, DType::kF32, d, 0, 0.3, &g));
      EXPECT_TRUE(params.back().set_requires_grad(true).ok());
    }
  }
  absl::StatusOr<std::vector<Tensor>> operator()(
      const std::vector<Tensor>& in) const {
    MIXRT_ASSIGN_OR_RETURN(Tensor h, linear(in[0], params[0], params[1]));
    MIXRT_ASSIGN_OR_RETURN(h, relu(h));
    MIXRT_ASSIGN_OR_RETURN(Tensor logits, linear(h, params[2], params[3]));
    MIXRT_ASSIGN_OR_RETURN(Tensor loss, cross_entropy(logits, in[1]));
    return std::vector<Tensor>{loss};
  }
};

// The losses of `steps` SGD steps on one batch, through `f` or eagerly.
std::vector<double> Train(const Device& d, const std::string& mode, int steps) {
  Model model(d);
  Generator g(9);
  const Tensor x = *randn({12, 16}, DType::kF32, d, 0, 1, &g);
  const Tensor y =
      *from_ints({0, 1, 2, 3, 4, 5, 0, 1, 2, 3, 4, 5}, {12}, DType::kI64, d);
  auto sgd = *SGD::Create(model.params, {.lr = 0.5});
  std::optional<CompiledFunction> f;
  if (!mode.empty()) f = *compile(model, {.mode = mode});
  std::vector<double> losses;
  for (int step = 0; step < steps; ++step) {
    auto out = f ? (*f)({x, y}) : model({x, y});
    EXPECT_TRUE(out.ok()) << out.status();
    if (!out.ok()) return losses;
    losses.push_back(*(*out)[0].item());
    EXPECT_TRUE((*out)[0].backward().ok());
    EXPECT_TRUE(sgd->step().ok());
    sgd->zero_grad();
  }
  if (f) {
    // Each missing op is in the forward or the backward: the call cannot
    // be one graph of this plugin's launches, and Explain says so.
    EXPECT_THAT(f->Explain(),
                HasSubstr("an op its device does not run (it ran on a "
                          "fallback backend)"));
  }
  return losses;
}

TEST(FallbackCompile, CompiledTrainingOnAPartialPluginLearnsAsEagerDoes) {
  testing::CpuDevice();  // The fallback backend.
  const std::vector<double> reference =
      Train(testing::ReferenceDevice(), "", 10);
  ASSERT_EQ(reference.size(), 10u);
  EXPECT_LT(reference.back(), 0.5 * reference.front());
  for (const char* partial : {"partial_no_relu_backward", "partial_no_backward",
                              "partial_no_reduce_unary"}) {
    const Device d = Load(partial);
    ASSERT_TRUE(d.valid());
    const std::vector<double> eager = Train(d, "", 10);
    // The reference kernels everywhere but where the CPU plugin ran a
    // missing op: f32 rounding apart over 10 steps.
    ASSERT_EQ(eager.size(), reference.size());
    for (size_t i = 0; i < eager.size(); ++i) {
      EXPECT_NEAR(eager[i], reference[i], 1e-5 * reference[i]) << partial;
    }
    for (const char* mode : {"default", "reduce-overhead", "max-autotune",
                             "max-autotune-no-cudagraphs"}) {
      SCOPED_TRACE(absl::StrCat(partial, " ", mode));
      EXPECT_EQ(Train(d, mode, 10), eager);
    }
  }
}

}  // namespace
}  // namespace mixrt
