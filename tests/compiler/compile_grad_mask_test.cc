// A compiled training step gives eager's gradients whichever inputs of an
// op need them: every mix of requires_grad over every tensor input of the
// ops below, with the op's first input also feeding a residual add (its
// gradient arrives from two places), three calls each (the first traces,
// the others replay). A port of a GPT with a frozen (zero, no-grad)
// LayerNorm bias crashed the first replayed backward here.
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/compiler/compile.h"
#include "core/functional/ops.h"
#include "core/tensor/factories.h"
#include "gtest/gtest.h"
#include "mixrt/status_macros.h"
#include "tests/testing/test_plugins.h"

namespace mixrt {
namespace {

struct OpCase {
  const char* name;
  // The op's tensor inputs, made on `d`; input 0 is the "activation".
  std::function<std::vector<Tensor>(const Device& d, Generator* g)> make;
  std::function<absl::StatusOr<Tensor>(const std::vector<Tensor>&)> op;
};

std::vector<OpCase> Cases() {
  return {
      {"layer_norm",
       [](const Device& d, Generator* g) {
         return std::vector<Tensor>{*randn({6, 16}, DType::kF32, d, 0, 1, g),
                                    *randn({16}, DType::kF32, d, 1, 0.1, g),
                                    *randn({16}, DType::kF32, d, 0, 0.1, g)};
       },
       [](const std::vector<Tensor>& t) {
         return layer_norm(t[0], 1, t[1], t[2]);
       }},
      {"linear",
       [](const Device& d, Generator* g) {
         return std::vector<Tensor>{*randn({6, 16}, DType::kF32, d, 0, 1, g),
                                    *randn({16, 16}, DType::kF32, d, 0, 0.2, g),
                                    *randn({16}, DType::kF32, d, 0, 0.1, g)};
       },
       [](const std::vector<Tensor>& t) { return linear(t[0], t[1], t[2]); }},
      {"mul",
       [](const Device& d, Generator* g) {
         return std::vector<Tensor>{*randn({6, 16}, DType::kF32, d, 0, 1, g),
                                    *randn({16}, DType::kF32, d, 1, 0.1, g)};
       },
       [](const std::vector<Tensor>& t) { return mul(t[0], t[1]); }},
  };
}

// sum((op(inputs) * 0.5 + inputs[0])^2): a residual, and a gradient that
// differs element by element.
absl::StatusOr<std::vector<Tensor>> Step(const OpCase& c,
                                         const std::vector<Tensor>& in) {
  MIXRT_ASSIGN_OR_RETURN(Tensor y, c.op(in));
  MIXRT_ASSIGN_OR_RETURN(Tensor half, scale(y, 0.5));
  MIXRT_ASSIGN_OR_RETURN(Tensor r, add(half, in[0]));
  MIXRT_ASSIGN_OR_RETURN(Tensor square, mul(r, r));
  MIXRT_ASSIGN_OR_RETURN(Tensor loss, sum(square));
  return std::vector<Tensor>{loss};
}

std::vector<std::vector<float>> Grads(const std::vector<Tensor>& in) {
  std::vector<std::vector<float>> grads;
  for (const Tensor& t : in) {
    grads.push_back(t.grad().defined() ? *t.grad().to_float_vector()
                                       : std::vector<float>{});
  }
  return grads;
}

TEST(CompileGradMask, EveryMixOfRequiresGradGivesEagersGradients) {
  const Device d = testing::CpuDevice();
  for (const OpCase& c : Cases()) {
    Generator probe(1);
    const size_t n = c.make(d, &probe).size();
    for (uint32_t mask = 0; mask < (1u << n); ++mask) {
      if (mask == 0) continue;  // Nothing to differentiate.
      SCOPED_TRACE(::testing::Message() << c.name << " mask " << mask);
      auto fn = [&c](const std::vector<Tensor>& x) { return Step(c, x); };
      absl::StatusOr<CompiledFunction> compiled = compile(fn);
      ASSERT_TRUE(compiled.ok()) << compiled.status();
      for (uint64_t call = 0; call < 3; ++call) {
        SCOPED_TRACE(::testing::Message() << "call " << call);
        Generator g(10 + call);
        std::vector<Tensor> eager_in = c.make(d, &g);
        std::vector<Tensor> compiled_in;
        for (size_t i = 0; i < n; ++i) {
          compiled_in.push_back(*eager_in[i].clone());
          const bool needs = (mask >> i) & 1;
          ASSERT_TRUE(eager_in[i].set_requires_grad(needs).ok());
          ASSERT_TRUE(compiled_in[i].set_requires_grad(needs).ok());
        }
        absl::StatusOr<std::vector<Tensor>> want = Step(c, eager_in);
        ASSERT_TRUE(want.ok()) << want.status();
        ASSERT_TRUE((*want)[0].backward().ok());
        absl::StatusOr<std::vector<Tensor>> got = (*compiled)(compiled_in);
        ASSERT_TRUE(got.ok()) << got.status();
        const absl::Status backward = (*got)[0].backward();
        ASSERT_TRUE(backward.ok()) << backward;
        EXPECT_EQ(*(*got)[0].to_float_vector(), *(*want)[0].to_float_vector());
        // The same launches in the same order: bit for bit.
        EXPECT_EQ(Grads(compiled_in), Grads(eager_in));
      }
    }
  }
}

}  // namespace
}  // namespace mixrt
