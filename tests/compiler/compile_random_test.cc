// Random ops inside compiled functions (issue 49): dropout, attention's
// dropout and random tensors are traced into the graph with the default
// generator's state as an input, so every replay draws new numbers: the
// ones eager draws from the same generator state, bit for bit, forward and
// backward, in every mode, at every size of a dynamic one, on the CPU
// plugin and the reference plugin. Draws a graph cannot redo stay graph
// breaks with their reason.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "core/autograd/grad_mode.h"
#include "core/compiler/compile.h"
#include "core/functional/ops.h"
#include "core/kernels/dropout.h"
#include "core/nn/transformer.h"
#include "core/tensor/factories.h"
#include "core/tensor/generator.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "mixrt/status_macros.h"
#include "tests/testing/test_plugins.h"

namespace mixrt {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

using Fn = std::function<absl::StatusOr<std::vector<Tensor>>(
    const std::vector<Tensor>&)>;

std::vector<uint8_t> Bytes(const Tensor& t) { return *t.to_bytes(); }

Tensor Input(const Device& d, int64_t rows, int64_t cols, uint64_t seed,
             bool requires_grad = false) {
  Generator g(seed);
  Tensor t = *randn({rows, cols}, DType::kF32, d, 0, 1, &g);
  if (requires_grad) {
    EXPECT_TRUE(t.set_requires_grad(true).ok());
  }
  return t;
}

// What `fn` returns over `calls` calls from seed 11, and the gradients of
// `params` after each call's backward of the first result's sum (when
// they need gradients), as bytes; the generator's offset after.
struct CallsRun {
  std::vector<std::vector<uint8_t>> values;
  uint64_t offset_after = 0;
};

#define ASSERT_OK_AND_BACKWARD(loss)                \
  do {                                              \
    EXPECT_TRUE(loss.ok()) << loss.status();        \
    if (!loss.ok()) return run;                     \
    const absl::Status backward = loss->backward(); \
    EXPECT_TRUE(backward.ok()) << backward;         \
    if (!backward.ok()) return run;                 \
  } while (0)

CallsRun Calls(const Fn& fn, const std::vector<std::vector<Tensor>>& calls,
               const std::vector<Tensor>& params) {
  manual_seed(11);
  CallsRun run;
  for (const std::vector<Tensor>& inputs : calls) {
    for (Tensor p : params) p.set_grad(Tensor());
    absl::StatusOr<std::vector<Tensor>> out = fn(inputs);
    EXPECT_TRUE(out.ok()) << out.status();
    if (!out.ok()) return run;
    for (const Tensor& t : *out) run.values.push_back(Bytes(t.detach()));
    if (params.empty()) continue;
    absl::StatusOr<Tensor> loss = sum((*out)[0]);
    ASSERT_OK_AND_BACKWARD(loss);
    for (const Tensor& p : params) {
      EXPECT_TRUE(p.grad().defined());
      if (p.grad().defined()) run.values.push_back(Bytes(p.grad()));
    }
  }
  run.offset_after = DefaultGenerator().offset();
  return run;
}

std::vector<float> Floats(const std::vector<uint8_t>& bytes) {
  std::vector<float> x(bytes.size() / 4);
  std::memcpy(x.data(), bytes.data(), 4 * x.size());
  return x;
}

// The largest difference of two f32 byte strings (inf: other sizes).
double LargestDifference(const std::vector<uint8_t>& a,
                         const std::vector<uint8_t>& b) {
  if (a.size() != b.size()) return INFINITY;
  const std::vector<float> x = Floats(a), y = Floats(b);
  double worst = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    worst = std::max(worst, std::fabs(static_cast<double>(x[i]) - y[i]));
  }
  return worst;
}

// How two f32 byte strings differ, in words.
std::string Difference(const std::vector<uint8_t>& a,
                       const std::vector<uint8_t>& b) {
  if (a.size() != b.size()) return "sizes differ";
  const std::vector<float> x = Floats(a), y = Floats(b);
  size_t count = 0;
  for (size_t i = 0; i < x.size(); ++i) count += x[i] != y[i];
  return absl::StrCat(count, " of ", x.size(), " elements, by up to ",
                      LargestDifference(a, b));
}

// `fn` compiled in `mode` against eager over the same calls: equal bytes,
// one trace (no graph break), the generator where eager leaves it, and the
// calls' masks not all alike (a replay that repeated the trace's numbers).
// `tolerance` > 0: f32 values within it instead of equal bytes.
void ExpectCompiledDrawsAsEager(const Fn& fn,
                                const std::vector<std::vector<Tensor>>& calls,
                                const std::vector<Tensor>& params,
                                CompileOptions options, double tolerance = 0) {
  const CallsRun eager = Calls(fn, calls, params);
  absl::StatusOr<CompiledFunction> compiled = compile(fn, options);
  ASSERT_TRUE(compiled.ok()) << compiled.status();
  const CallsRun replayed = Calls(*compiled, calls, params);
  ASSERT_EQ(replayed.values.size(), eager.values.size());
  for (size_t i = 0; i < eager.values.size(); ++i) {
    if (tolerance > 0) {
      EXPECT_LE(LargestDifference(replayed.values[i], eager.values[i]),
                tolerance)
          << options.mode << ": value " << i;
      continue;
    }
    EXPECT_TRUE(replayed.values[i] == eager.values[i])
        << options.mode << ": value " << i
        << " differs: " << Difference(replayed.values[i], eager.values[i]);
  }
  EXPECT_EQ(replayed.offset_after, eager.offset_after) << options.mode;
  EXPECT_THAT(compiled->Explain(), Not(HasSubstr("graph break")))
      << compiled->Explain();
  EXPECT_EQ(compiled->eager_calls(), 0) << compiled->Explain();
  EXPECT_NE(eager.values[0], eager.values[eager.values.size() / 2]);
}

class CompiledRandom : public ::testing::TestWithParam<const char*> {
 protected:
  Device device() const {
    return std::string(GetParam()) == "cpu" ? testing::CpuDevice()
                                            : testing::ReferenceDevice();
  }
};

const char* const kModes[] = {"default", "reduce-overhead", "max-autotune"};

// Two dropouts of one input and one of a later result: three draws whose
// offsets follow one another.
TEST_P(CompiledRandom, DropoutForwardEqualsEager) {
  const Device d = device();
  const Fn fn =
      [](const std::vector<Tensor>& in) -> absl::StatusOr<std::vector<Tensor>> {
    MIXRT_ASSIGN_OR_RETURN(Tensor a, dropout(in[0], 0.5));
    MIXRT_ASSIGN_OR_RETURN(Tensor b, dropout(in[0], 0.5));
    MIXRT_ASSIGN_OR_RETURN(Tensor s, add(a, b));
    MIXRT_ASSIGN_OR_RETURN(Tensor c, dropout(s, 0.25));
    return std::vector<Tensor>{c, a};
  };
  const Tensor x = Input(d, 8, 33, 1);
  for (const char* mode : kModes) {
    ExpectCompiledDrawsAsEager(fn, {{x}, {x}, {x}, {x}}, {}, {.mode = mode});
  }
}

// A training MLP with dropout between its layers: the backward regenerates
// each call's mask from the numbers its own forward drew.
TEST_P(CompiledRandom, DropoutTrainingStepEqualsEager) {
  const Device d = device();
  const Tensor w1 = Input(d, 32, 16, 2, true);
  const Tensor w2 = Input(d, 4, 32, 3, true);
  const Fn fn = [&](const std::vector<Tensor>& in)
      -> absl::StatusOr<std::vector<Tensor>> {
    MIXRT_ASSIGN_OR_RETURN(Tensor h, linear(in[0], w1, Tensor()));
    MIXRT_ASSIGN_OR_RETURN(h, relu(h));
    MIXRT_ASSIGN_OR_RETURN(h, dropout(h, 0.3));
    MIXRT_ASSIGN_OR_RETURN(Tensor y, linear(h, w2, Tensor()));
    MIXRT_ASSIGN_OR_RETURN(y, dropout(y, 0.1));
    return std::vector<Tensor>{y};
  };
  const Tensor x = Input(d, 8, 16, 4);
  const Tensor x2 = Input(d, 8, 16, 5);
  for (const char* mode : kModes) {
    ExpectCompiledDrawsAsEager(fn, {{x}, {x2}, {x}, {x2}}, {w1, w2},
                               {.mode = mode});
  }
}

// Attention's own dropout (the fused kernel and its backward read the
// same numbers) and a random tensor made inside the function.
TEST_P(CompiledRandom, AttentionDropoutAndRandomTensorsEqualEager) {
  const Device d = device();
  const Tensor q = Input(d, 16, 8, 6, true);
  const Fn fn = [&](const std::vector<Tensor>& in)
      -> absl::StatusOr<std::vector<Tensor>> {
    MIXRT_ASSIGN_OR_RETURN(Tensor noise,
                           rand({16, 8}, DType::kF32, in[0].device()));
    MIXRT_ASSIGN_OR_RETURN(Tensor k, add(in[0], noise));
    MIXRT_ASSIGN_OR_RETURN(Tensor qs, reshape(q, {1, 16, 8}));
    MIXRT_ASSIGN_OR_RETURN(Tensor ks, reshape(k, {1, 16, 8}));
    MIXRT_ASSIGN_OR_RETURN(
        Tensor y, scaled_dot_product_attention(qs, ks, ks, {.dropout_p = 0.2}));
    return std::vector<Tensor>{y, noise};
  };
  const Tensor x = Input(d, 16, 8, 7);
  for (const char* mode : kModes) {
    ExpectCompiledDrawsAsEager(fn, {{x}, {x}, {x}}, {q}, {.mode = mode});
  }
}

// A transformer block with dropout (attention's and the residual ones)
// compiled as a module: the training step of every model with dropout.
TEST_P(CompiledRandom, TransformerBlockWithDropoutTrainsAsEager) {
  const Device d = device();
  // No generator of its own: its dropout draws from the default one, which
  // each run starts from the same seed.
  manual_seed(4);
  auto block = *nn::TransformerBlock::Create(
      {.width = 16, .heads = 2, .dropout = 0.1, .causal = true}, d);
  const Tensor x = Input(d, 6, 16, 8);
  const Fn eager = [&](const std::vector<Tensor>& in)
      -> absl::StatusOr<std::vector<Tensor>> {
    MIXRT_ASSIGN_OR_RETURN(Tensor x3, in[0].reshape({1, 6, 16}));
    MIXRT_ASSIGN_OR_RETURN(Tensor y, block->forward(x3));
    return std::vector<Tensor>{y};
  };
  // The masks are eager's on both plugins; the reference plugin's compiled
  // backward of the block sums some gradients in another order than its
  // eager one (4.8e-7 at most, with dropout 0 as well): f32 rounding.
  const double tolerance = std::string(GetParam()) == "cpu" ? 0 : 1e-6;
  for (const char* mode : kModes) {
    ExpectCompiledDrawsAsEager(eager, {{x}, {x}, {x}}, block->parameters(),
                               {.mode = mode}, tolerance);
  }
}

// dynamic=true over batch sizes: each size's draws are its own (the
// offsets of later draws move with earlier draws' sizes). Rows of 8
// values are 2 Philox blocks each, so the offsets are a + b N and one
// graph serves every size; rows of 9 round up to blocks unevenly, which no
// formula fits, and every size is traced for itself: the same numbers
// either way.
TEST_P(CompiledRandom, DynamicSizesDrawAsEager) {
  const Device d = device();
  const Fn fn =
      [](const std::vector<Tensor>& in) -> absl::StatusOr<std::vector<Tensor>> {
    MIXRT_ASSIGN_OR_RETURN(Tensor a, dropout(in[0], 0.5));
    MIXRT_ASSIGN_OR_RETURN(Tensor b, dropout(a, 0.5));
    return std::vector<Tensor>{b};
  };
  for (int64_t cols : {8, 9}) {
    std::vector<std::vector<Tensor>> calls;
    for (int64_t rows : {2, 3, 5, 7, 6, 3}) {
      calls.push_back({Input(d, rows, cols, 20 + rows)});
    }
    const CallsRun eager = Calls(fn, calls, {});
    auto compiled = compile(fn, {.dynamic = true});
    ASSERT_TRUE(compiled.ok());
    const CallsRun replayed = Calls(*compiled, calls, {});
    EXPECT_EQ(replayed.values, eager.values) << compiled->Explain();
    EXPECT_EQ(replayed.offset_after, eager.offset_after);
    const std::string explain = compiled->Explain();
    if (cols == 8) {
      EXPECT_THAT(explain, HasSubstr("dynamic size (input 0 dim 0): verified"))
          << explain;
    } else {
      EXPECT_THAT(explain, HasSubstr("sizes stay static")) << explain;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Plugins, CompiledRandom,
                         ::testing::Values("cpu", "reference"));

// A generator of the caller's own is a random source like the default
// one: its replays draw from it (and only from it). Once it is destroyed
// the graph cannot run: the next call traces again, with the generator the
// function uses then.
TEST(CompiledRandomSources, CallersGeneratorsDrawAsEagerAndRetraceWhenGone) {
  const Device d = testing::CpuDevice();
  const Tensor x = Input(d, 6, 8, 1);
  auto own = std::make_unique<Generator>(5);
  const Fn fn = [&](const std::vector<Tensor>& in)
      -> absl::StatusOr<std::vector<Tensor>> {
    MIXRT_ASSIGN_OR_RETURN(Tensor a, dropout(in[0], 0.5, own.get()));
    MIXRT_ASSIGN_OR_RETURN(Tensor b, dropout(a, 0.5));  // The default one.
    return std::vector<Tensor>{b};
  };
  auto eager_with = [&](uint64_t seed) {
    own = std::make_unique<Generator>(seed);
    const CallsRun run = Calls(fn, {{x}, {x}, {x}}, {});
    return std::make_pair(run, own->offset());
  };
  const auto [eager, eager_own_offset] = eager_with(5);
  auto compiled = compile(fn);
  ASSERT_TRUE(compiled.ok());
  own = std::make_unique<Generator>(5);
  const CallsRun replayed = Calls(*compiled, {{x}, {x}, {x}}, {});
  EXPECT_EQ(replayed.values, eager.values);
  EXPECT_EQ(replayed.offset_after, eager.offset_after);
  EXPECT_EQ(own->offset(), eager_own_offset);
  EXPECT_EQ(compiled->eager_calls(), 0) << compiled->Explain();

  // A new generator: the old graph's is gone, so the call traces again
  // and draws from the new one, as eager does.
  const auto [eager9, eager9_own_offset] = eager_with(9);
  own = std::make_unique<Generator>(9);
  const CallsRun after = Calls(*compiled, {{x}, {x}, {x}}, {});
  EXPECT_EQ(after.values, eager9.values);
  EXPECT_EQ(own->offset(), eager9_own_offset);
  EXPECT_THAT(compiled->Explain(), HasSubstr("is gone")) << compiled->Explain();
}

// Numbers drawn before the call, read inside it, would be read again by a
// replay: a graph break with the reason (an error under fullgraph).
TEST(CompiledRandomSources, NumbersDrawnBeforeTheCallRunEagerly) {
  const Device d = testing::CpuDevice();
  const Tensor x = Input(d, 4, 4, 1);
  absl::StatusOr<kernels::DropoutOutput> before = kernels::dropout(x, 0.5);
  ASSERT_TRUE(before.ok());
  const kernels::DropoutState state = before->state;
  const Fn earlier = [&](const std::vector<Tensor>& in)
      -> absl::StatusOr<std::vector<Tensor>> {
    MIXRT_ASSIGN_OR_RETURN(Tensor y, kernels::dropout_backward(in[0], state));
    return std::vector<Tensor>{y};
  };
  auto g = compile(earlier);
  auto got = (*g)({x});
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(Bytes((*got)[0]), Bytes(*kernels::dropout_backward(x, state)));
  EXPECT_THAT(g->Explain(), HasSubstr("drawn before the call"));
  auto strict = compile(earlier, {.fullgraph = true});
  const absl::Status refused = (*strict)({x}).status();
  EXPECT_THAT(refused.message(), HasSubstr("drawn before the call"));
}

}  // namespace
}  // namespace mixrt
