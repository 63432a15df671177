// mixrt::compile on the CPU plugin: replays are bit-identical to eager runs
// of the same function (the same kernels run in the same order), every
// guard kind recompiles instead of running a stale graph, graph breaks run
// eagerly (or fail under fullgraph) with their reason, the recompile limit
// falls back to eager, results stay the caller's, and bad options are
// refused.
#include "core/compiler/compile.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <optional>
#include <regex>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "core/allocator/caching_allocator.h"
#include "core/amp/autocast/autocast.h"
#include "core/autograd/grad_mode.h"
#include "core/functional/ops.h"
#include "core/kernels/fill_copy.h"
#include "core/nn/module.h"
#include "core/optim/optimizer.h"
#include "core/plugin/registry.h"
#include "core/tensor/factories.h"
#include "core/tensor/op_profile.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "mixrt/status_macros.h"
#include "tests/testing/test_plugins.h"

namespace mixrt {
namespace {

using ::testing::ContainsRegex;
using ::testing::HasSubstr;
using ::testing::Not;

Device Cpu() { return testing::CpuDevice(); }

// A two-layer MLP's forward with weights held by the closure (constants
// of the graph, as a module's parameters are).
struct Mlp {
  Tensor w1, b1, w2, b2;
  explicit Mlp(const Device& d) {
    Generator g(7);
    w1 = *randn({64, 32}, DType::kF32, d, 0, 0.2, &g);
    b1 = *randn({64}, DType::kF32, d, 0, 0.2, &g);
    w2 = *randn({10, 64}, DType::kF32, d, 0, 0.2, &g);
    b2 = *randn({10}, DType::kF32, d, 0, 0.2, &g);
  }
  absl::StatusOr<std::vector<Tensor>> operator()(
      const std::vector<Tensor>& in) const {
    MIXRT_ASSIGN_OR_RETURN(Tensor h, linear(in[0], w1, b1));
    MIXRT_ASSIGN_OR_RETURN(h, gelu(h));
    MIXRT_ASSIGN_OR_RETURN(Tensor out, linear(h, w2, b2));
    MIXRT_ASSIGN_OR_RETURN(Tensor p, softmax(out, -1));
    return std::vector<Tensor>{out, p};
  }
};

std::vector<uint8_t> Bytes(const Tensor& t) { return *t.to_bytes(); }

// Whether a plan (its Explain) runs a GEMM whose weights it packed on
// oneDNN's gemm:jit, the f32 GEMM of CPUs without AVX-512 (or capped to
// AVX2): the packed GEMM blocks its sums in another order than the plain
// one eager runs, so a replay agrees with eager within f32 rounding there.
// On brgemm CPUs (AVX-512 and up) packed and plain GEMMs sum alike and
// replays are eager's bit for bit.
bool PacksOnGemmJit(const std::string& explain) {
  return std::regex_search(
      explain,
      std::regex("weights packed per version\\)[^\\]]*\\(gemm:jit\\)"));
}

// A replay's result against eager's: bit for bit, or, where the plan packs
// a GEMM on gemm:jit, within f32 rounding (1e-5 of the largest magnitude:
// K <= 64 products summed in another order, then GELU and softmax).
::testing::AssertionResult MatchesEager(const Tensor& got, const Tensor& want,
                                        const std::string& explain) {
  if (Bytes(got) == Bytes(want)) return ::testing::AssertionSuccess();
  if (!PacksOnGemmJit(explain) || got.dtype() != DType::kF32 ||
      got.shape() != want.shape()) {
    return ::testing::AssertionFailure() << "not eager's bytes";
  }
  const std::vector<float> a = *got.to_float_vector(),
                           b = *want.to_float_vector();
  float scale = 1;
  for (float v : b) scale = std::max(scale, std::fabs(v));
  for (size_t i = 0; i < a.size(); ++i) {
    if (!(std::fabs(a[i] - b[i]) <= 1e-5f * scale)) {
      return ::testing::AssertionFailure()
             << "element " << i << ": " << a[i] << " vs eager's " << b[i]
             << " (packed GEMM on gemm:jit, allowed " << 1e-5f * scale << ")";
    }
  }
  return ::testing::AssertionSuccess();
}

// The plan's own passes keep eager's kernels, so its results are eager's
// bit for bit; the plugin's fusion (part 2) may not be (a GEMM epilogue
// keeps the product in f32 through its chain), so these tests turn it off
// (tests/compiler/cpu_fusion_numerics_test checks it within tolerance).
class ScopedFusionOff {
 public:
  ScopedFusionOff() { setenv("MIXRT_COMPILE_FUSION", "0", 1); }
  ~ScopedFusionOff() { unsetenv("MIXRT_COMPILE_FUSION"); }
};

Tensor Input(const Device& d, int64_t rows, uint64_t seed) {
  Generator g(seed);
  return *randn({rows, 32}, DType::kF32, d, 0, 1, &g);
}

// `count` square weights [size, size] ~ N(0, stddev) that need gradients.
std::vector<Tensor> SquareWeights(const Device& d, Generator* g, int count,
                                  int64_t size, double stddev) {
  std::vector<Tensor> weights;
  for (int i = 0; i < count; ++i) {
    Tensor w = *randn({size, size}, DType::kF32, d, 0, stddev, g);
    EXPECT_TRUE(w.set_requires_grad(true).ok());
    weights.push_back(w);
  }
  return weights;
}

// linear + relu over each of `weights` in turn; with `loss`, summed.
compiler::TracedFunction LinearReluChain(std::vector<Tensor> weights,
                                         bool loss) {
  return [weights, loss](const std::vector<Tensor>& in)
             -> absl::StatusOr<std::vector<Tensor>> {
    Tensor h = in[0];
    for (const Tensor& w : weights) {
      MIXRT_ASSIGN_OR_RETURN(h, linear(h, w, Tensor()));
      MIXRT_ASSIGN_OR_RETURN(h, relu(h));
    }
    if (loss) {
      MIXRT_ASSIGN_OR_RETURN(h, sum(h));
    }
    return std::vector<Tensor>{h};
  };
}

TEST(Compile, ReplaysMatchEagerBitForBitInF32AndUnderAutocast) {
  const ScopedFusionOff fusion_off;
  const Device d = Cpu();
  const Mlp mlp(d);
  for (bool autocast : {false, true}) {
    InferenceModeGuard inference;
    std::optional<AutocastGuard> guard;
    if (autocast) guard.emplace("cpu", DType::kBF16);
    auto f = compile(mlp);
    ASSERT_TRUE(f.ok()) << f.status();
    for (uint64_t seed : {1, 2, 3}) {
      const std::vector<Tensor> in = {Input(d, 16, seed)};
      auto got = (*f)(in);
      ASSERT_TRUE(got.ok()) << got.status();
      auto want = mlp(in);
      ASSERT_TRUE(want.ok());
      ASSERT_EQ(got->size(), 2u);
      for (int k = 0; k < 2; ++k) {
        EXPECT_EQ((*got)[k].dtype(), (*want)[k].dtype());
        EXPECT_EQ((*got)[k].shape(), (*want)[k].shape());
        EXPECT_EQ(Bytes((*got)[k]), Bytes((*want)[k]))
            << "autocast " << autocast << " seed " << seed << " output " << k;
      }
    }
    EXPECT_EQ(f->compiles(), 1);
    EXPECT_EQ(f->replays(), 2);
    EXPECT_EQ(f->eager_calls(), 0);
    if (autocast) {
      // The autocast casts are launches of the graph: bf16 matmuls.
      EXPECT_THAT(f->Explain(), HasSubstr("matmul(buf"));
      EXPECT_THAT(f->Explain(), HasSubstr(":bf16["));
    }
  }
}

TEST(Compile, EachGuardKindRecompilesInsteadOfRunningAStaleGraph) {
  const Device d = Cpu();
  const Mlp mlp(d);
  auto f = compile(mlp);
  ASSERT_TRUE(f.ok());
  InferenceModeGuard inference;
  auto check = [&](const std::vector<Tensor>& in, int compiles,
                   const std::string& cause) {
    auto got = (*f)(in);
    ASSERT_TRUE(got.ok()) << got.status();
    auto want = mlp(in);
    EXPECT_TRUE(MatchesEager((*got)[1], (*want)[1], f->Explain())) << cause;
    EXPECT_EQ(f->compiles(), compiles) << cause;
    if (!cause.empty()) {
      EXPECT_THAT(f->Explain(), HasSubstr(cause));
    }
  };
  // Each call differs from the one before in one guard.
  const Tensor x = Input(d, 16, 1);
  check({x}, 1, "first call");
  check({Input(d, 8, 2)}, 2, "input 0 shape changed from [16, 32] to [8, 32]");
  // A transposed view: same shape, other strides.
  const Tensor t = *(*randn({32, 8}, DType::kF32, d)).transpose(0, 1);
  check({t}, 3, "input 0 strides changed from [32, 1] to [1, 8]");
  {
    AutocastGuard bf16("cpu", DType::kBF16);
    check({t}, 4, "autocast state changed from  to cpu:on,bf16");
  }
  check({x}, 4, "");  // The first signature again: a replay.
  EXPECT_EQ(f->replays(), 1);
}

TEST(Compile, InputDtypeIsGuarded) {
  const Device d = Cpu();
  auto f = compile(
      [](const std::vector<Tensor>& in) -> absl::StatusOr<std::vector<Tensor>> {
        MIXRT_ASSIGN_OR_RETURN(Tensor out, gelu(in[0]));
        return std::vector<Tensor>{out};
      });
  InferenceModeGuard inference;
  const Tensor x = Input(d, 4, 1), y = *x.to(DType::kBF16);
  ASSERT_TRUE((*f)({x}).ok());
  auto low = (*f)({y});
  ASSERT_TRUE(low.ok());
  EXPECT_EQ((*low)[0].dtype(), DType::kBF16);
  EXPECT_EQ(Bytes((*low)[0]), Bytes(*gelu(y)));
  EXPECT_EQ(f->compiles(), 2);
  EXPECT_THAT(f->Explain(),
              HasSubstr("input 0 dtype changed from f32 to bf16"));
}

TEST(Compile, GradModeIsGuarded) {
  const Device d = Cpu();
  const Mlp mlp(d);
  auto f = compile(mlp);
  ASSERT_TRUE(f.ok());
  const Tensor x = Input(d, 4, 1);
  {
    NoGradGuard no_grad;
    ASSERT_TRUE((*f)({x}).ok());
  }
  ASSERT_TRUE((*f)({x}).ok());
  EXPECT_EQ(f->compiles(), 2);
  EXPECT_THAT(f->Explain(), HasSubstr("grad mode changed from off to on"));
}

TEST(Compile, AHostReadIsAGraphBreakWithoutFullgraph) {
  const Device d = Cpu();
  auto reads =
      [](const std::vector<Tensor>& in) -> absl::StatusOr<std::vector<Tensor>> {
    MIXRT_ASSIGN_OR_RETURN(Tensor s, sum(in[0]));
    MIXRT_ASSIGN_OR_RETURN(double v, s.item());
    MIXRT_ASSIGN_OR_RETURN(Tensor out, scale(in[0], v > 0 ? 2.0 : -2.0));
    return std::vector<Tensor>{out};
  };
  const Tensor x = Input(d, 4, 3);
  auto f = compile(reads);
  ASSERT_TRUE(f.ok());
  for (int i = 0; i < 2; ++i) {
    auto got = (*f)({x});
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_EQ(Bytes((*got)[0]), Bytes((*reads({x}))[0]));
  }
  EXPECT_EQ(f->eager_calls(), 1);  // The traced call was the first.
  EXPECT_THAT(f->Explain(), HasSubstr("a host read of tensor data"));
  auto explained = compile_explain(reads, {x});
  ASSERT_TRUE(explained.ok());
  EXPECT_THAT(*explained,
              HasSubstr("graph break in call 1 (first call): a host read"));
}

// Under fullgraph a host read is captured, as PyTorch 2.15 captures
// .item() (capture_scalar_outputs): the graph guards the value read, a
// replay that finds it again runs whole, and one that finds another value
// stops at the read and traces the call again (the host code after the
// read used the value: here it picks the sign and a scale). Results equal
// eager's every call; no recompile is counted for values.
TEST(Compile, FullgraphCapturesAHostReadGuardingItsValue) {
  const Device d = Cpu();
  auto reads =
      [](const std::vector<Tensor>& in) -> absl::StatusOr<std::vector<Tensor>> {
    MIXRT_ASSIGN_OR_RETURN(Tensor s, sum(in[0]));
    MIXRT_ASSIGN_OR_RETURN(double v, s.item());
    MIXRT_ASSIGN_OR_RETURN(Tensor out, scale(in[0], v > 0 ? 2.0 : -2.0, v));
    return std::vector<Tensor>{out, s};
  };
  const Tensor pos = *full({4, 3}, 0.5, DType::kF32, d);
  const Tensor neg = *full({4, 3}, -0.25, DType::kF32, d);
  const Tensor pos2 = *full({4, 3}, 0.75, DType::kF32, d);
  auto strict = compile(reads, {.fullgraph = true});
  ASSERT_TRUE(strict.ok());
  for (const Tensor& x : {pos, pos, neg, neg, pos2, pos, pos}) {
    auto got = (*strict)({x});
    ASSERT_TRUE(got.ok()) << got.status();
    auto want = reads({x});
    EXPECT_EQ(Bytes((*got)[0]), Bytes((*want)[0]));
    EXPECT_EQ(Bytes((*got)[1]), Bytes((*want)[1]));
  }
  const std::string explain = strict->Explain();
  EXPECT_EQ(strict->compiles(), 1) << explain;
  EXPECT_EQ(strict->eager_calls(), 0) << explain;
  // pos, neg, pos2 and pos again each traced once: 3 new values after the
  // first; the repeats replayed whole.
  EXPECT_THAT(explain, HasSubstr("3 traces for new host read values"))
      << explain;
  EXPECT_THAT(explain, HasSubstr("host_read(")) << explain;
  EXPECT_THAT(explain, HasSubstr("3 replays")) << explain;
}

// A replay that stops at a host read runs the call again, so nothing
// before the read may have written memory that outlives the call: that
// stays a graph break, an error under fullgraph.
TEST(Compile, FullgraphRefusesAHostReadAfterAnInPlaceWrite) {
  const Device d = Cpu();
  Tensor counter = *zeros({1}, DType::kF32, d);
  auto writes_then_reads = [&](const std::vector<Tensor>& in)
      -> absl::StatusOr<std::vector<Tensor>> {
    MIXRT_RETURN_IF_ERROR(kernels::fill_(counter, 1.0));
    MIXRT_ASSIGN_OR_RETURN(Tensor s, sum(in[0]));
    MIXRT_ASSIGN_OR_RETURN(double v, s.item());
    MIXRT_ASSIGN_OR_RETURN(Tensor out, scale(in[0], v));
    return std::vector<Tensor>{out};
  };
  auto strict = compile(writes_then_reads, {.fullgraph = true});
  ASSERT_TRUE(strict.ok());
  auto refused = (*strict)({Input(d, 4, 3)});
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(refused.status().message(), HasSubstr("fullgraph"));
  EXPECT_THAT(refused.status().message(),
              HasSubstr("wrote an input or a tensor the function closes over"));
}

// A whole training step (backward and the optimizer inside the traced
// code) would replay stale .grad tensors and step counts: a graph break.
TEST(Compile, BackwardOrAnOptimizerStepInsideTheTraceRunsEagerly) {
  const Device d = Cpu();
  Tensor w = *randn({8, 4}, DType::kF32, d);
  ASSERT_TRUE(w.set_requires_grad(true).ok());
  SGD opt({w}, {.lr = 0.1});
  auto whole_step = [&](const std::vector<Tensor>& in)
      -> absl::StatusOr<std::vector<Tensor>> {
    MIXRT_ASSIGN_OR_RETURN(Tensor loss, sum(*linear(in[0], w, Tensor())));
    MIXRT_RETURN_IF_ERROR(loss.backward());
    MIXRT_RETURN_IF_ERROR(opt.step());
    opt.zero_grad();
    return std::vector<Tensor>{loss.detach()};
  };
  auto f = compile(whole_step);
  const Tensor x = Input(d, 2, 1).detach();
  const Tensor x4 = *(*x.slice(1, 0, 4)).contiguous();
  ASSERT_TRUE((*f)({x4}).ok());
  EXPECT_THAT(f->Explain(), HasSubstr("backward() inside the traced code"));
  auto only_step = compile([&](const std::vector<Tensor>& in)
                               -> absl::StatusOr<std::vector<Tensor>> {
    MIXRT_RETURN_IF_ERROR(opt.step());
    return in;
  });
  ASSERT_TRUE((*only_step)({x4}).ok());
  EXPECT_THAT(only_step->Explain(), HasSubstr("an optimizer step"));
}

// Parameters that need gradients, and a loss of an MLP over them.
struct Trainable {
  Tensor w1, b1, w2, b2;
  bool relu_hidden = false;  // relu between the layers instead of gelu.
  explicit Trainable(const Device& d, bool relu = false) : relu_hidden(relu) {
    const Mlp init(d);
    for (auto [mine, theirs] : {std::pair{&w1, &init.w1},
                                {&b1, &init.b1},
                                {&w2, &init.w2},
                                {&b2, &init.b2}}) {
      *mine = *theirs->clone();
      EXPECT_TRUE(mine->set_requires_grad(true).ok());
    }
  }
  absl::StatusOr<std::vector<Tensor>> operator()(
      const std::vector<Tensor>& in) const {
    MIXRT_ASSIGN_OR_RETURN(Tensor h, linear(in[0], w1, b1));
    MIXRT_ASSIGN_OR_RETURN(h, relu_hidden ? relu(h) : gelu(h));
    MIXRT_ASSIGN_OR_RETURN(Tensor logits, linear(h, w2, b2));
    MIXRT_ASSIGN_OR_RETURN(Tensor loss, cross_entropy(logits, in[1]));
    return std::vector<Tensor>{loss, logits};
  }
  std::vector<Tensor> params() const { return {w1, b1, w2, b2}; }
};

// d loss / d (parameters, x) after `loss.backward()`, cleared after.
std::vector<std::vector<uint8_t>> TakeGrads(const Trainable& m, Tensor& x) {
  std::vector<std::vector<uint8_t>> grads;
  std::vector<Tensor> all = m.params();
  all.push_back(x);
  for (Tensor& t : all) {
    EXPECT_TRUE(t.grad().defined());
    if (!t.grad().defined()) return grads;
    grads.push_back(Bytes(t.grad()));
    t.set_grad(Tensor());
  }
  return grads;
}

// Whether each gradient in `got` is `want`'s within `rel` of that
// gradient's largest magnitude, NaN where want's is.
void ExpectGradsNear(const std::vector<std::vector<uint8_t>>& got,
                     const std::vector<std::vector<uint8_t>>& want, float rel) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t t = 0; t < got.size(); ++t) {
    ASSERT_EQ(got[t].size(), want[t].size());
    std::vector<float> a(got[t].size() / 4), b(want[t].size() / 4);
    std::memcpy(a.data(), got[t].data(), got[t].size());
    std::memcpy(b.data(), want[t].data(), want[t].size());
    float scale = 0;
    for (float v : b) {
      if (std::isfinite(v)) scale = std::max(scale, std::fabs(v));
    }
    for (size_t i = 0; i < a.size(); ++i) {
      ASSERT_EQ(std::isnan(a[i]), std::isnan(b[i]))
          << "gradient " << t << " element " << i;
      if (!std::isnan(b[i])) {
        ASSERT_NEAR(a[i], b[i], rel * scale)
            << "gradient " << t << " element " << i;
      }
    }
  }
}

// With relu between the layers the joint passes run too: the relu becomes
// the first matmul's epilogue (its gradient reads the relu's result instead
// of the pre-activation) and the backward reads the mean cross entropy's
// count of targets from the forward instead of counting again. Same
// kernels on the same values: the loss and every gradient stay eager's bit
// for bit, a NaN row included (an overflow must still reach the
// GradScaler). A GELU saves its derivative instead of its input (one erfc
// for both in the forward), and its gradient is the incoming gradient's
// matmul times that: bit for bit in f32, where the multiply is the one
// the gradient kernel does; under bf16 autocast the derivative is rounded
// to bf16 where eager rounds the incoming gradient instead, so the
// gradients agree to bf16's precision (two roundings of 2^-9 each, summed
// over the batch: 2^-6 of the gradient's largest element).
TEST(Compile, ACompiledBackwardGivesEagersGradientsBitForBit) {
  // Fused loops as generated code, built before the first run.
  setenv("MIXRT_CPU_CODEGEN", "sync", 1);
  setenv("MIXRT_CACHE_DIR", ::testing::TempDir().c_str(), 1);
  const Device d = Cpu();
  // reduce-overhead replays runs of launches as kernel graphs (ABI 1.1).
  for (const char* mode : {"default", "reduce-overhead"})
    for (bool autocast : {false, true})
      for (bool relu : {false, true}) {
        SCOPED_TRACE(::testing::Message()
                     << mode << " autocast " << autocast << " relu " << relu);
        const Trainable model(d, relu);
        std::optional<AutocastGuard> guard;
        if (autocast) guard.emplace("cpu", DType::kBF16);
        auto f = compile(model, {.mode = mode});
        ASSERT_TRUE(f.ok());
        for (uint64_t seed : {1, 2, 3}) {
          Tensor x = Input(d, 16, seed);
          if (seed == 3) {
            // A NaN in row 2: its logits, the loss and every gradient are NaN.
            std::vector<float> v = *x.to_float_vector();
            v[2 * 32 + 5] = std::numeric_limits<float>::quiet_NaN();
            x = *from_floats(v, {16, 32}, DType::kF32, d);
          }
          ASSERT_TRUE(x.set_requires_grad(true).ok());
          const Tensor y =
              *from_ints({1, 3, 5, 7, 9, 0, 2, 4, 6, 8, 1, 3, 5, 7, 9, 0}, {16},
                         DType::kI64, d);
          auto want = model({x, y});
          ASSERT_TRUE(want.ok());
          ASSERT_TRUE((*want)[0].backward().ok());
          const auto eager_grads = TakeGrads(model, x);
          auto got = (*f)({x, y});
          ASSERT_TRUE(got.ok()) << got.status();
          EXPECT_EQ(Bytes((*got)[0]), Bytes((*want)[0])) << seed;
          EXPECT_EQ(Bytes((*got)[1]), Bytes((*want)[1])) << seed;
          ASSERT_TRUE((*got)[0].requires_grad());
          const absl::Status backward = (*got)[0].backward();
          ASSERT_TRUE(backward.ok()) << backward << " seed " << seed;
          if (autocast && !relu) {
            ExpectGradsNear(TakeGrads(model, x), eager_grads, 1.0f / 64);
          } else {
            EXPECT_EQ(TakeGrads(model, x), eager_grads) << "seed " << seed;
          }
          if (seed == 3) {
            EXPECT_TRUE(std::isnan(*(*got)[0].item()));
          }
        }
        EXPECT_EQ(f->compiles(), 1);
        EXPECT_EQ(f->replays(), 2);
        EXPECT_THAT(f->Explain(), HasSubstr("+ a backward of"));
        EXPECT_THAT(f->Explain(),
                    ContainsRegex(
                        "\\([1-9] backward launches read forward results\\)"));
        if (relu) {
          // The CPU plugin fuses each activation's gradient with its bias
          // gradient (one loop; under autocast with the cast to the f32 bias
          // gradient), and the gradients above came out bit for bit.
          EXPECT_THAT(
              f->Explain(),
              ContainsRegex(
                  "fused\\[fused loop: unary_backward, (copy, )?reduce \\("));
          // The relu's is generated code, and so were the gradients above.
          EXPECT_THAT(
              f->Explain(),
              ContainsRegex("fused loop: unary_backward, (copy, )?reduce "
                            "\\(generated C\\+\\+\\)\\]"));
          EXPECT_THAT(f->Explain(), HasSubstr("(1 relus fused into matmuls)"));
          // The pre-activation is no longer a launch's result in the forward.
          EXPECT_THAT(f->Explain(), Not(HasSubstr("= unary(")));
        } else {
          EXPECT_THAT(f->Explain(), Not(HasSubstr("relus fused")));
          EXPECT_THAT(f->Explain(),
                      HasSubstr("(1 GELUs save their derivative)"));
          EXPECT_THAT(f->Explain(),
                      HasSubstr("fused[GELU with its gradient (one erfc)]"));
          // The gradient is a multiply by the saved derivative, not a GELU
          // gradient over the saved input: the matmul's epilogue, or (these
          // small ones) a loop with the bias gradient.
          EXPECT_THAT(f->Explain(), Not(HasSubstr("unary_backward(")));
          EXPECT_THAT(
              f->Explain(),
              ContainsRegex(
                  "post-ops binary_mul|fused loop: binary, (copy, )?reduce"));
        }
        if (std::string(mode) == "reduce-overhead") {
          EXPECT_THAT(f->Explain(), HasSubstr("; kernel graphs: 1 ("));
          EXPECT_THAT(f->Explain(),
                      ContainsRegex(
                          "backward \\([0-9]+ launches; kernel graphs: [1-9]"));
        } else {
          EXPECT_THAT(f->Explain(), Not(HasSubstr("kernel graphs")));
        }
      }
}

// Without fusion the forward would take the GELU gradient's pass on top
// of its own: the GELU keeps saving its input, and the gradients are
// eager's bit for bit under bf16 autocast too.
TEST(Compile, AGeluSavesItsDerivativeOnlyWhereTheBackendFuses) {
  const Device d = Cpu();
  setenv("MIXRT_COMPILE_FUSION", "0", 1);
  const Trainable model(d);
  AutocastGuard guard("cpu", DType::kBF16);
  auto f = compile(model);
  ASSERT_TRUE(f.ok());
  Tensor x = Input(d, 16, 5);
  ASSERT_TRUE(x.set_requires_grad(true).ok());
  const Tensor y = *from_ints({1, 3, 5, 7, 9, 0, 2, 4, 6, 8, 1, 3, 5, 7, 9, 0},
                              {16}, DType::kI64, d);
  auto want = model({x, y});
  ASSERT_TRUE(want.ok());
  ASSERT_TRUE((*want)[0].backward().ok());
  const auto eager_grads = TakeGrads(model, x);
  auto got = (*f)({x, y});
  unsetenv("MIXRT_COMPILE_FUSION");
  ASSERT_TRUE(got.ok()) << got.status();
  ASSERT_TRUE((*got)[0].backward().ok());
  EXPECT_EQ(TakeGrads(model, x), eager_grads);
  EXPECT_THAT(f->Explain(), Not(HasSubstr("GELUs save")));
  EXPECT_THAT(f->Explain(), HasSubstr("unary_backward("));
}

TEST(Compile, GradientsFlowIntoAnInputsHistoryAndASecondBackwardIsRefused) {
  const Device d = Cpu();
  const Trainable model(d);
  auto f = compile(model);
  Generator g(3);
  const Tensor w0 = *randn({32, 32}, DType::kF32, d, 0, 0.2, &g);
  const Tensor y = *from_ints({1, 2, 3, 4}, {4}, DType::kI64, d);
  std::vector<std::vector<uint8_t>> eager;
  for (int call = 0; call < 3; ++call) {
    // The compiled region's input comes from an eager op with history.
    Tensor x0 = Input(d, 4, 9);
    ASSERT_TRUE(x0.set_requires_grad(true).ok());
    const Tensor x = *linear(x0, w0, Tensor());
    auto out = call == 0 ? model({x, y}) : (*f)({x, y});
    ASSERT_TRUE(out.ok());
    ASSERT_TRUE((*out)[0].backward().ok());
    const std::vector<uint8_t> g0 = Bytes(x0.grad());
    for (Tensor& p : model.params()) p.set_grad(Tensor());
    if (call == 0) {
      eager.push_back(g0);
    } else {
      EXPECT_EQ(g0, eager[0]) << "call " << call;
      auto again = (*out)[0].backward();
      EXPECT_FALSE(again.ok());
      EXPECT_THAT(again.message(), HasSubstr("a second time"));
    }
  }
}

TEST(Compile, TheRecompileLimitFallsBackToEager) {
  const Device d = Cpu();
  const Mlp mlp(d);
  InferenceModeGuard inference;
  // Static sizes: each new one is a recompile (a dynamic size would not
  // count toward the limit).
  auto f = compile(mlp, {.dynamic = false, .recompile_limit = 2});
  ASSERT_TRUE(f.ok());
  for (int64_t rows : {1, 2, 3, 4}) {
    const std::vector<Tensor> in = {Input(d, rows, rows)};
    auto got = (*f)(in);
    ASSERT_TRUE(got.ok());
    EXPECT_EQ(Bytes((*got)[0]), Bytes((*mlp(in))[0])) << rows;
  }
  EXPECT_EQ(f->compiles(), 2);
  EXPECT_EQ(f->eager_calls(), 2);
  EXPECT_THAT(f->Explain(),
              HasSubstr("recompile limit reached (input 0 shape"));
}

// Under fullgraph, as PyTorch 2.15 (FailOnRecompileLimitHit): a call past
// the limit is an error naming the guard, never an eager run; the
// signatures compiled before it still replay.
TEST(Compile, TheRecompileLimitUnderFullgraphIsAnError) {
  const Device d = Cpu();
  const Mlp mlp(d);
  InferenceModeGuard inference;
  auto f =
      compile(mlp, {.dynamic = false, .fullgraph = true, .recompile_limit = 2});
  ASSERT_TRUE(f.ok());
  const std::vector<Tensor> in = {Input(d, 2, 2)};
  ASSERT_TRUE((*f)({Input(d, 1, 1)}).ok());
  ASSERT_TRUE((*f)(in).ok());  // Traced.
  auto first = (*f)(in);       // Replayed.
  ASSERT_TRUE(first.ok()) << first.status();
  auto over = (*f)({Input(d, 3, 3)});
  EXPECT_TRUE(absl::IsResourceExhausted(over.status())) << over.status();
  EXPECT_THAT(over.status().message(),
              HasSubstr("recompile limit (2) reached with fullgraph=true; "
                        "the guard that failed: input 0 shape"));
  // The compiled signature replays as it replayed before the refused call
  // (its plan, not eager: with the ISA capped to AVX2 a replay's packed
  // GEMM differs from the traced call in the last bits).
  auto again = (*f)(in);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(Bytes((*again)[0]), Bytes((*first)[0]));
  EXPECT_EQ(f->compiles(), 2);
  EXPECT_EQ(f->eager_calls(), 0);
}

// Serving under autocast: a weight's bf16 cast is kept between replays and
// redone only when the weight changes through the runtime (an in-place op,
// an optimizer step), so replays keep eager's results bit for bit.
TEST(Compile, AWeightCastIsKeptUntilItsWeightChanges) {
  const Device d = Cpu();
  Generator g(11);
  const Tensor w = *randn({96, 64}, DType::kF32, d, 0, 0.1, &g);
  const Tensor x = *randn({8, 64}, DType::kF32, d, 0, 1, &g);
  auto serve = [&](const std::vector<Tensor>& in)
      -> absl::StatusOr<std::vector<Tensor>> {
    MIXRT_ASSIGN_OR_RETURN(Tensor y, linear(in[0], w, Tensor()));
    return std::vector<Tensor>{y};
  };
  InferenceModeGuard inference;
  AutocastGuard autocast("cpu", DType::kBF16);
  for (const char* mode : {"default", "reduce-overhead"}) {
    auto f = compile(serve, {.mode = mode});
    ASSERT_TRUE(f.ok());
    for (int call = 0; call < 3; ++call) {
      EXPECT_EQ(Bytes((*(*f)({x}))[0]), Bytes((*serve({x}))[0]))
          << mode << " call " << call;
    }
    EXPECT_THAT(f->Explain(),
                HasSubstr("1 launch on constants kept (12288 bytes"))
        << mode;
    if (testing::CpuRunsNatively(MIXRT_OP_CLASS_MATMUL, DType::kBF16)) {
      // Packed, the cast is released until the weight changes.
      EXPECT_THAT(f->Explain(), HasSubstr("12288 of them released")) << mode;
      // The CPU plugin packs the kept cast for oneDNN once per its version.
      EXPECT_THAT(f->Explain(),
                  HasSubstr("oneDNN matmul (weights packed per version)"))
          << mode;
    } else {
      // Emulated bf16 matmul is not fused: the kept cast stays.
      EXPECT_THAT(f->Explain(), Not(HasSubstr("of them released"))) << mode;
    }
    // Changed in place twice: each replay sees the weight of its call.
    for (double value : {0.25, -0.5}) {
      ASSERT_TRUE(kernels::fill_(w, value).ok());
      const std::vector<uint8_t> want = Bytes((*serve({x}))[0]);
      EXPECT_EQ(Bytes((*(*f)({x}))[0]), want)
          << mode << " after fill " << value;
      EXPECT_EQ(Bytes((*(*f)({x}))[0]), want) << mode << " replayed again";
    }
    ASSERT_TRUE(
        kernels::copy_(w, *randn({96, 64}, DType::kF32, d, 0, 0.1, &g)).ok());
  }
}

// A weight written by a compiled function (an update replayed as a
// launch, not through the eager runtime) still counts as changed: another
// compiled function's kept cast of it is computed again.
TEST(Compile, AWeightWrittenByAReplayInvalidatesKeptCasts) {
  const Device d = Cpu();
  Generator g(13);
  const Tensor w = *randn({32, 64}, DType::kF32, d, 0, 0.1, &g);
  const Tensor x = *randn({4, 64}, DType::kF32, d, 0, 1, &g);
  auto serve = [&](const std::vector<Tensor>& in)
      -> absl::StatusOr<std::vector<Tensor>> {
    MIXRT_ASSIGN_OR_RETURN(Tensor y, linear(in[0], w, Tensor()));
    return std::vector<Tensor>{y};
  };
  auto update = [&](const std::vector<Tensor>& in)
      -> absl::StatusOr<std::vector<Tensor>> {
    MIXRT_RETURN_IF_ERROR(kernels::copy_(w, in[0]));
    return std::vector<Tensor>{in[0]};
  };
  InferenceModeGuard inference;
  for (const char* mode : {"default", "reduce-overhead"}) {
    auto f = compile(serve, {.mode = mode});
    auto set = compile(update, {.mode = mode});
    ASSERT_TRUE(f.ok() && set.ok());
    for (int call = 0; call < 4; ++call) {
      const Tensor next = *randn({32, 64}, DType::kF32, d, 0, 0.1, &g);
      ASSERT_TRUE((*set)({next}).ok());
      std::vector<uint8_t> want, got;
      {
        AutocastGuard autocast("cpu", DType::kBF16);
        want = Bytes((*serve({x}))[0]);
        got = Bytes((*(*f)({x}))[0]);
      }
      EXPECT_EQ(got, want) << mode << " call " << call;
    }
    EXPECT_GE(set->replays(), 2) << mode;
  }
}

// Two instances of one module share a graph under bf16 autocast: the
// graph's kept weight casts are compared by version, and both instances'
// weights, fresh, had been written as often (both at 1 when versions were
// counts from 0): instance b must never run on a's casts. Versions are now
// stamps no two storages share.
TEST(Compile, AnotherInstancesWeightsAreNeverTakenForKeptCasts) {
  const Device d = Cpu();
  Generator g1(4), g2(5);
  auto a = *nn::MLP({16, 24, 8}, d, &g1);
  auto b = *nn::MLP({16, 24, 8}, d, &g2);
  auto ca = compile(a, {.share_across_instances = true});
  auto cb = compile(b, {.share_across_instances = true});
  ASSERT_TRUE(ca.ok() && cb.ok());
  EXPECT_NE(a->parameters()[0].storage()->version(),
            b->parameters()[0].storage()->version());
  const Tensor x = *randn({5, 16}, DType::kF32, d);
  InferenceModeGuard inference;
  AutocastGuard autocast("cpu", DType::kBF16);
  for (int call = 0; call < 2; ++call) {
    for (auto [module, compiled] : {std::pair{a, &*ca}, std::pair{b, &*cb}}) {
      auto got = (*compiled)(x);
      ASSERT_TRUE(got.ok()) << got.status();
      EXPECT_EQ(Bytes(*got), Bytes(*module->forward(x))) << "call " << call;
    }
  }
}

// Host values are constants of a graph (a replay repeats them). verify
// traces every call again and compares: a changed scalar argument or a
// different weight tensor is found, named, and the call's results are
// eager's; the signature then traces anew.
TEST(Compile, VerifyFindsHostValuesAGraphBakedIn) {
  const Device d = Cpu();
  Generator g(17);
  const Tensor x = *randn({4, 8}, DType::kF32, d, 0, 1, &g);
  Tensor weight = *randn({8, 8}, DType::kF32, d, 0, 1, &g);
  double factor = 2.0;
  auto fn = [&](const std::vector<Tensor>& in)
      -> absl::StatusOr<std::vector<Tensor>> {
    MIXRT_ASSIGN_OR_RETURN(Tensor y, scale(in[0], factor));
    MIXRT_ASSIGN_OR_RETURN(y, linear(y, weight, Tensor()));
    return std::vector<Tensor>{y};
  };
  InferenceModeGuard inference;
  auto f = compile(fn, {.verify = true});
  ASSERT_TRUE(f.ok());
  auto call = [&] { return Bytes((*(*f)({x}))[0]); };
  EXPECT_EQ(call(), Bytes((*fn({x}))[0]));
  EXPECT_EQ(call(), Bytes((*fn({x}))[0]));  // Verified: nothing differs.
  EXPECT_THAT(f->Explain(), Not(HasSubstr("verify:")));
  factor = 3.0;
  ::testing::internal::CaptureStderr();
  EXPECT_EQ(call(), Bytes((*fn({x}))[0]));
  EXPECT_THAT(::testing::internal::GetCapturedStderr(),
              HasSubstr("node 0 (unary): its attributes changed"));
  EXPECT_EQ(f->compiles(), 1);
  EXPECT_EQ(call(), Bytes((*fn({x}))[0]));  // Traced anew at 3.0.
  EXPECT_EQ(f->compiles(), 2);
  EXPECT_THAT(f->Explain(),
              HasSubstr("compiled graph 2 (verify: node 0 (unary)"));
  // Another tensor in the variable: the one traced is gone, which the
  // replay finds before verify does (it traces again without it).
  weight = *randn({8, 8}, DType::kF32, d, 0, 1, &g);
  EXPECT_EQ(call(), Bytes((*fn({x}))[0]));
  EXPECT_EQ(f->compiles(), 3);
  EXPECT_THAT(
      f->Explain(),
      HasSubstr(
          "compiled graph 3 (a tensor it read that is not an input is gone"));
}

// Freezing without the promise: what is computed from constants alone (here
// a chain of two launches) is kept, and recomputed, chain and all, when a
// constant changes.
TEST(Compile, LaunchesOnConstantsAloneAreKeptUntilAConstantChanges) {
  const Device d = Cpu();
  Generator g(12);
  const Tensor w = *randn({16, 32}, DType::kF32, d, 0, 0.5, &g);
  auto fn = [&](const std::vector<Tensor>& in)
      -> absl::StatusOr<std::vector<Tensor>> {
    MIXRT_ASSIGN_OR_RETURN(Tensor squared, mul(w, w));
    MIXRT_ASSIGN_OR_RETURN(Tensor weight, exp(squared));
    MIXRT_ASSIGN_OR_RETURN(Tensor y, linear(in[0], weight, Tensor()));
    return std::vector<Tensor>{y};
  };
  InferenceModeGuard inference;
  auto f = compile(fn);
  const Tensor x = Input(d, 4, 7);
  for (double value : {0.0, 0.125, -0.25}) {
    if (value != 0.0) {
      ASSERT_TRUE(kernels::fill_(w, value).ok());
    }
    for (int call = 0; call < 2; ++call) {
      EXPECT_EQ(Bytes((*(*f)({x}))[0]), Bytes((*fn({x}))[0]))
          << "weight " << value << " call " << call;
    }
  }
  EXPECT_THAT(f->Explain(), HasSubstr("2 launches on constants kept"));
}

TEST(Compile, ResultsStayTheCallersInEveryMode) {
  const Device d = Cpu();
  const Mlp mlp(d);
  InferenceModeGuard inference;
  for (const char* mode : {"default", "reduce-overhead"}) {
    auto f = compile(mlp, {.mode = mode});
    ASSERT_TRUE(f.ok());
    const std::vector<Tensor> a = {Input(d, 8, 1)}, b = {Input(d, 8, 2)};
    auto first = (*f)(a);
    auto second = (*f)(a);  // A replay.
    const std::vector<uint8_t> kept = Bytes((*second)[0]);
    auto third = (*f)(b);  // Another replay, other values.
    ASSERT_TRUE(third.ok());
    EXPECT_EQ(Bytes((*second)[0]), kept) << mode;
    EXPECT_NE(Bytes((*third)[0]), kept) << mode;
    EXPECT_TRUE(MatchesEager((*third)[0], (*mlp(b))[0], f->Explain())) << mode;
  }
}

// Temporaries live from their first to their last launch: a replay's peak
// tensor memory is at most eager's, and reduce-overhead's held buffers are
// shared by lifetime (a ten-layer chain needs two, not ten). Temporaries
// of 64 KiB and more are not held: they come from the caching allocator.
TEST(Compile, PlannedPeakMemoryIsAtMostEagers) {
  const Device d = Cpu();
  std::vector<Tensor> weights;
  Generator g(5);
  for (int i = 0; i < 10; ++i) {
    weights.push_back(*randn({256, 256}, DType::kF32, d, 0, 0.05, &g));
  }
  const auto deep = LinearReluChain(weights, /*loss=*/false);
  InferenceModeGuard inference;
  CachingAllocator& allocator = d.backend()->allocator(d.index());
  auto peak_of = [&](auto&& call) {
    allocator.ResetPeak();
    const uint64_t before = allocator.stats().bytes_in_use;
    auto out = call();
    EXPECT_TRUE(out.ok());
    return allocator.stats().peak_bytes_in_use - before;
  };
  for (const int64_t rows : {32, 128}) {
    const Tensor x = *randn({rows, 256}, DType::kF32, d);
    const uint64_t eager = peak_of([&] { return deep({x}); });
    const uint64_t activation = rows * 256 * 4;
    for (const char* mode : {"default", "reduce-overhead"}) {
      auto f = compile(deep, {.mode = mode});
      ASSERT_TRUE((*f)({x}).ok());  // The trace.
      const uint64_t replay = peak_of([&] { return (*f)({x}); });
      EXPECT_LE(replay, eager) << mode << " rows " << rows;
      if (std::string(mode) == "reduce-overhead") {
        // Two alternating buffers (a linear's output, then relu's) and the
        // result; the held ones were allocated before the measurement.
        EXPECT_THAT(
            f->Explain(),
            HasSubstr(absl::StrCat(activation < 64 * 1024 ? 2 * activation : 0,
                                   " bytes held between calls")))
            << rows;
      }
    }
  }
}

// A training step's peak from the forward through the backward: the
// compiled backward frees each saved activation after its last use, as
// eager backward frees each node's after the node runs, and in
// reduce-overhead the forward's held buffers serve the backward's, so a
// replay peaks no higher than eager (held memory counted); with
// retain_graph the activations stay for a second backward, which then
// gives the same gradients again.
TEST(Compile, ATrainingReplaysPeakMemoryIsAtMostEagers) {
  const Device d = Cpu();
  Generator g(8);
  std::vector<Tensor> weights = SquareWeights(d, &g, 8, 256, 0.05);
  const auto deep = LinearReluChain(weights, /*loss=*/true);
  const Tensor x = *randn({512, 256}, DType::kF32, d, 0, 1, &g);
  CachingAllocator& allocator = d.backend()->allocator(d.index());
  auto clear_grads = [&] {
    for (Tensor& w : weights) w.set_grad(Tensor());
  };
  for (bool autocast : {false, true}) {
    std::optional<AutocastGuard> guard;
    if (autocast) guard.emplace("cpu", DType::kBF16);
    // Peak over what was in use at `base` (before compiling: the held
    // buffers of reduce-overhead count as the step's).
    auto step_peak = [&](uint64_t base, auto&& call) {
      clear_grads();
      allocator.ResetPeak();
      absl::StatusOr<std::vector<Tensor>> out = call();
      EXPECT_TRUE(out.ok());
      EXPECT_TRUE((*out)[0].backward().ok());
      return allocator.stats().peak_bytes_in_use - base;
    };
    const uint64_t eager =
        step_peak(allocator.stats().bytes_in_use, [&] { return deep({x}); });
    for (const char* mode : {"default", "reduce-overhead"}) {
      const uint64_t base = allocator.stats().bytes_in_use;
      auto f = compile(deep, {.mode = mode});
      ASSERT_TRUE(f.ok());
      step_peak(base, [&] { return (*f)({x}); });  // The trace.
      const uint64_t replay = step_peak(base, [&] { return (*f)({x}); });
      EXPECT_LE(replay, eager) << mode << " autocast " << autocast;
    }
    auto f = compile(deep);
    ASSERT_TRUE(f.ok());
    ASSERT_TRUE((*f)({x}).ok());  // The trace.
    // Kept for a second backward: gradients accumulate twice.
    clear_grads();
    auto out = (*f)({x});
    ASSERT_TRUE(out.ok());
    ASSERT_TRUE((*out)[0].backward(Tensor(), /*retain_graph=*/true).ok());
    const Tensor first = *weights[0].grad().clone();
    ASSERT_TRUE((*out)[0].backward().ok());
    EXPECT_EQ(Bytes(weights[0].grad()), Bytes(*add(first, first)))
        << "autocast " << autocast;
  }
}

// reduce-overhead's steady state allocates only what the caller gets: the
// activations its backward reads reuse the last step's memory once that
// backward let go of it (a kept reference makes the next run allocate).
TEST(Compile, AReduceOverheadReplayAllocatesOnlyItsResults) {
  const Device d = Cpu();
  Generator g(5);
  std::vector<Tensor> weights = SquareWeights(d, &g, 3, 32, 0.2);
  const auto chain = LinearReluChain(weights, /*loss=*/true);
  const Tensor x = *randn({8, 32}, DType::kF32, d, 0, 1, &g);
  CachingAllocator& allocator = d.backend()->allocator(d.index());
  auto f = compile(chain, {.mode = "reduce-overhead"});
  ASSERT_TRUE(f.ok());
  std::vector<uint8_t> first_grad;
  for (int step = 0; step < 4; ++step) {
    for (Tensor& w : weights) w.set_grad(Tensor());
    const uint64_t before = allocator.stats().num_allocations;
    auto out = (*f)({x});
    ASSERT_TRUE(out.ok());
    const uint64_t forward_allocations =
        allocator.stats().num_allocations - before;
    ASSERT_TRUE((*out)[0].backward().ok());
    if (step == 0) first_grad = Bytes(weights[0].grad());
    EXPECT_EQ(Bytes(weights[0].grad()), first_grad) << step;
    if (step >= 2) {
      EXPECT_EQ(forward_allocations, 1u) << step;  // The loss.
    }
  }
  // A backward graph kept alive holds its activations: the next call
  // takes fresh memory and both backwards see their own.
  for (Tensor& w : weights) w.set_grad(Tensor());
  auto kept = (*f)({x});
  const Tensor x2 = *randn({8, 32}, DType::kF32, d, 0, 1, &g);  // Other masks.
  auto second = (*f)({x2});
  ASSERT_TRUE(kept.ok() && second.ok());
  ASSERT_TRUE((*kept)[0].backward().ok());
  EXPECT_EQ(Bytes(weights[0].grad()), first_grad);
}

// One compiled function called from several threads at once, with two
// signatures: each thread's results match eager (the cache and the plans
// are shared; runs of one plan are serialized). Run under TSan in CI.
TEST(Compile, CallsFromManyThreadsShareOneCache) {
  const Device d = Cpu();
  const Mlp mlp(d);
  auto f = compile(mlp, {.mode = "reduce-overhead"});
  ASSERT_TRUE(f.ok());
  std::vector<std::thread> threads;
  std::atomic<int> mismatches{0};
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      InferenceModeGuard inference;
      for (int i = 0; i < 20; ++i) {
        const std::vector<Tensor> in = {
            Input(d, 4 + 4 * ((t + i) % 2), t * 100 + i)};
        auto got = (*f)(in);
        auto want = mlp(in);
        if (!got.ok() || !want.ok() ||
            !MatchesEager((*got)[1], (*want)[1], f->Explain())) {
          ++mismatches;
        }
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(mismatches.load(), 0);
  EXPECT_EQ(f->compiles(), 2);
  EXPECT_EQ(f->replays() + f->compiles(), 80);
}

// Work whose results nothing uses is dropped from the graph; in-place
// updates of an input are kept (effects).
TEST(Compile, UnusedLaunchesAreDroppedAndEffectsKept) {
  const Device d = Cpu();
  auto wasteful =
      [](const std::vector<Tensor>& in) -> absl::StatusOr<std::vector<Tensor>> {
    MIXRT_ASSIGN_OR_RETURN(Tensor unused, exp(in[0]));
    MIXRT_ASSIGN_OR_RETURN(Tensor unused2, sum(unused));
    (void)unused2;
    MIXRT_RETURN_IF_ERROR(kernels::fill_(in[1], 3.0));  // An effect.
    MIXRT_ASSIGN_OR_RETURN(Tensor out, relu(in[0]));
    return std::vector<Tensor>{out};
  };
  InferenceModeGuard inference;
  auto f = compile(wasteful);
  const Tensor x = Input(d, 4, 1);
  for (int i = 0; i < 2; ++i) {
    Tensor side = *zeros({3}, DType::kF32, d);
    auto got = (*f)({x, side});
    ASSERT_TRUE(got.ok());
    EXPECT_EQ(Bytes((*got)[0]), Bytes(*relu(x)));
    EXPECT_EQ(*side.to_float_vector(), (std::vector<float>{3, 3, 3})) << i;
  }
  // fill_ and relu stay; exp and the sum of it go.
  EXPECT_THAT(f->Explain(),
              HasSubstr("2 launches (2 unused launches dropped)"));
}

// A launch repeating an earlier one on unchanged inputs runs once; one
// whose input was written in between (an in-place op) runs again.
TEST(Compile, RepeatedLaunchesRunOnce) {
  const Device d = Cpu();
  auto repetitive =
      [](const std::vector<Tensor>& in) -> absl::StatusOr<std::vector<Tensor>> {
    MIXRT_ASSIGN_OR_RETURN(Tensor a, relu(in[0]));
    MIXRT_ASSIGN_OR_RETURN(Tensor b, relu(in[0]));  // Merged into a.
    MIXRT_ASSIGN_OR_RETURN(Tensor ab, add(a, b));
    MIXRT_ASSIGN_OR_RETURN(Tensor before, exp(in[1]));
    MIXRT_RETURN_IF_ERROR(kernels::fill_(in[1], 0.5));
    MIXRT_ASSIGN_OR_RETURN(Tensor after, exp(in[1]));  // Not merged.
    MIXRT_ASSIGN_OR_RETURN(Tensor both, add(before, after));
    return std::vector<Tensor>{ab, both};
  };
  InferenceModeGuard inference;
  auto f = compile(repetitive);
  const Tensor x = Input(d, 4, 1);
  for (int i = 0; i < 3; ++i) {
    const Tensor side = Input(d, 2, 2 + i), side_eager = *side.clone();
    auto got = (*f)({x, side});
    auto want = repetitive({x, side_eager});
    ASSERT_TRUE(got.ok() && want.ok());
    EXPECT_EQ(Bytes((*got)[0]), Bytes((*want)[0])) << i;
    EXPECT_EQ(Bytes((*got)[1]), Bytes((*want)[1])) << i;
  }
  EXPECT_THAT(f->Explain(),
              HasSubstr("6 launches (1 repeated launches merged)"));
}

// cat copies each part into its place: a part that only the copy reads is
// written there by the launch producing it, and the copy goes; a part read
// elsewhere too, or a result of the call, stays a copy.
TEST(Compile, APartOfACatReadOnlyByItsCopyIsWrittenInPlace) {
  const Device d = Cpu();
  auto joined =
      [](const std::vector<Tensor>& in) -> absl::StatusOr<std::vector<Tensor>> {
    MIXRT_ASSIGN_OR_RETURN(Tensor a, exp(in[0]));      // Only the cat reads it.
    MIXRT_ASSIGN_OR_RETURN(Tensor b, relu(in[0]));     // Also read by the add.
    MIXRT_ASSIGN_OR_RETURN(Tensor c, neg(in[1]));      // Also a result.
    MIXRT_ASSIGN_OR_RETURN(Tensor e, sigmoid(in[1]));  // Only the cat reads it.
    MIXRT_ASSIGN_OR_RETURN(Tensor all, cat({a, b, c, e}, 0));
    MIXRT_ASSIGN_OR_RETURN(Tensor twice, mul(all, all));
    MIXRT_ASSIGN_OR_RETURN(Tensor more, add(b, b));
    return std::vector<Tensor>{twice, more, c};
  };
  InferenceModeGuard inference;
  auto f = compile(joined);
  for (int i = 0; i < 2; ++i) {
    const Tensor x = Input(d, 4, 7 + i), y = Input(d, 4, 9 + i);
    auto got = (*f)({x, y});
    auto want = joined({x, y});
    ASSERT_TRUE(got.ok() && want.ok()) << got.status();
    for (size_t k = 0; k < want->size(); ++k) {
      EXPECT_EQ(Bytes((*got)[k]), Bytes((*want)[k])) << i << " result " << k;
    }
  }
  EXPECT_THAT(f->Explain(),
              HasSubstr("(2 copies written in place by their producers)"));
  const std::string explain = f->Explain();
  EXPECT_THAT(explain,
              ContainsRegex("buf[0-9]+\\+384:f32\\[4, 32\\] = unary\\(arg1"));
  int copies = 0;
  for (size_t at = explain.find(" = copy("); at != std::string::npos;
       at = explain.find(" = copy(", at + 1)) {
    ++copies;
  }
  EXPECT_EQ(copies, 2) << explain;  // b's and c's.
}

// The op profile times a compiled graph's launches and fused kernels too,
// named apart from eager's ops; nothing while it is off.
TEST(Compile, TheOpProfileTimesCompiledLaunchesAndFusedKernels) {
  const Device d = Cpu();
  auto chain =
      [](const std::vector<Tensor>& in) -> absl::StatusOr<std::vector<Tensor>> {
    MIXRT_ASSIGN_OR_RETURN(Tensor a, exp(in[0]));
    MIXRT_ASSIGN_OR_RETURN(Tensor b, mul(a, a));
    MIXRT_ASSIGN_OR_RETURN(Tensor c, sum(b));
    return std::vector<Tensor>{a, c};
  };
  InferenceModeGuard inference;
  auto f = compile(chain);
  const Tensor x = Input(d, 4, 1);
  ASSERT_TRUE((*f)({x}).ok());  // The trace runs eagerly.
  ResetOpProfile();
  ASSERT_TRUE((*f)({x}).ok());
  EXPECT_TRUE(OpProfileEntries().empty());
  EnableOpProfile(true);
  for (int i = 0; i < 3; ++i) ASSERT_TRUE((*f)({x}).ok());
  EnableOpProfile(false);
  int64_t calls = 0;
  bool fused = false;
  for (const OpProfileEntry& e : OpProfileEntries()) {
    EXPECT_EQ(e.op.rfind("compiled ", 0), 0u) << e.op;  // No eager launch ran.
    EXPECT_GE(e.seconds, 0);
    calls += e.calls;
    fused |= e.op.rfind("compiled fused: ", 0) == 0;
  }
  // One entry per node per call: exp (a result) and the fused multiply and
  // sum, or three launches.
  const bool fusing = f->Explain().find("fused[") != std::string::npos;
  EXPECT_EQ(fused, fusing);
  EXPECT_EQ(calls, fusing ? 3 * 2 : 3 * 3) << f->Explain();
  ResetOpProfile();
}

// Automatic dynamic: sizes 4 and 8 trace (two compiles, as PyTorch's
// automatic dynamic recompiles once), 12 traces only to confirm the
// formulas, and every later size is traced once and checked against them;
// neither counts as a recompile; the results stay eager's.
TEST(Compile, ABatchSizeBecomesDynamicAfterTwoSizesAndACheck) {
  const Device d = Cpu();
  const Mlp mlp(d);
  InferenceModeGuard inference;
  auto f = compile(mlp);
  for (int64_t rows : {4, 8, 12, 16, 20, 3, 16}) {
    const std::vector<Tensor> in = {Input(d, rows, rows)};
    auto got = (*f)(in);
    ASSERT_TRUE(got.ok()) << got.status();
    auto want = mlp(in);
    for (int k = 0; k < 2; ++k) {
      EXPECT_EQ((*got)[k].shape(), (*want)[k].shape()) << rows;
      EXPECT_TRUE(MatchesEager((*got)[k], (*want)[k], f->Explain())) << rows;
    }
  }
  // 4 and 8 learn the formulas, 12 verifies them; 16, 20 and 3 are each
  // traced once more and checked (not counted as recompiles: past the
  // limit they would still be served), and 16 again replays.
  EXPECT_EQ(f->compiles(), 2);
  EXPECT_EQ(f->replays(), 1);
  EXPECT_THAT(f->Explain(), HasSubstr("dynamic from now on"));
  EXPECT_THAT(
      f->Explain(),
      HasSubstr("verified, learned from sizes 4 and 8, 3 more sizes checked"));
  EXPECT_THAT(f->Explain(), HasSubstr("(checking input 0 dim 0 at 20)"));
  EXPECT_THAT(f->Explain(), HasSubstr("(verifying input 0 dim 0 at 12)"));
}

// dynamic=true, as PyTorch's: sizes never count as recompiles. The second
// size learns (a trace, uncounted), the third verifies, the rest are
// checked: with a recompile limit of 1, every size is still compiled and
// none runs eagerly; a layout change still counts (and here, past the
// limit, runs eagerly).
TEST(Compile, DynamicTrueNeverCountsSizesAsRecompiles) {
  const Device d = Cpu();
  // A function of its own: no other test's learned sizes in the process's
  // compile cache.
  const Tensor w = Input(d, 32, 77);  // [32, 32]
  auto fn = [w](const std::vector<Tensor>& in)
      -> absl::StatusOr<std::vector<Tensor>> {
    MIXRT_ASSIGN_OR_RETURN(Tensor y, matmul(in[0], w));
    MIXRT_ASSIGN_OR_RETURN(Tensor r, relu(y));
    MIXRT_ASSIGN_OR_RETURN(Tensor t, tanh(r));
    return std::vector<Tensor>{t};
  };
  InferenceModeGuard inference;
  auto f = compile(fn, {.dynamic = true, .recompile_limit = 1});
  for (int64_t rows : {5, 9, 13, 17, 9}) {
    const std::vector<Tensor> in = {Input(d, rows, rows)};
    auto got = (*f)(in);
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_TRUE(MatchesEager((*got)[0], (*fn(in))[0], f->Explain())) << rows;
  }
  EXPECT_EQ(f->compiles(), 1);
  EXPECT_EQ(f->eager_calls(), 0) << f->Explain();
  EXPECT_EQ(f->replays(), 1);
  EXPECT_THAT(f->Explain(),
              HasSubstr("sizes changed under dynamic=true (learning them)"));
  // Every other row of a [10, 32] tensor: the shape of size 5, other
  // strides.
  const std::vector<Tensor> strided = {*Input(d, 10, 5).slice(0, 0, 10, 2)};
  ASSERT_TRUE((*f)(strided).ok());
  EXPECT_EQ(f->eager_calls(), 1) << "strides alone are no size";
}

// Host code that branches on a size: min(N, 3) rows, traced at 1, 2 and 3,
// looks like N to the formulas. A new size is never extrapolated from
// them: at 8 its trace (3 rows, not 8) refutes them and sizes stay static
// (the formulas would have read 8 rows, past what the function returns).
TEST(Compile, ASizeTheFormulasNeverSawIsTracedNotExtrapolated) {
  const Device d = Cpu();
  auto first_rows =
      [](const std::vector<Tensor>& in) -> absl::StatusOr<std::vector<Tensor>> {
    MIXRT_ASSIGN_OR_RETURN(
        Tensor head,
        narrow(in[0], 0, 0, std::min<int64_t>(in[0].shape()[0], 3)));
    MIXRT_ASSIGN_OR_RETURN(Tensor total, sum(head));
    return std::vector<Tensor>{total};
  };
  InferenceModeGuard inference;
  auto f = compile(first_rows);
  for (int64_t rows : {1, 2, 3, 8, 50, 8}) {
    const Tensor x = *full({rows, 2}, 1.0, DType::kF32, d);
    auto got = (*f)({x});
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_EQ(*(*got)[0].item(), 2.0 * std::min<int64_t>(rows, 3)) << rows;
  }
  EXPECT_THAT(
      f->Explain(),
      HasSubstr("input 0 dim 0 at 8: the trace differs from the formulas"));
}

TEST(Compile, ADynamicBatchTrainsWithEagersGradients) {
  const Device d = Cpu();
  const Trainable model(d);
  auto f = compile(model);
  for (int64_t rows : {4, 8, 12, 16}) {
    Tensor x = Input(d, rows, rows);
    ASSERT_TRUE(x.set_requires_grad(true).ok());
    std::vector<int64_t> labels(rows);
    for (int64_t i = 0; i < rows; ++i) labels[i] = i % 10;
    const Tensor y = *from_ints(labels, {rows}, DType::kI64, d);
    ASSERT_TRUE((*(model({x, y})))[0].backward().ok());
    const auto eager = TakeGrads(model, x);
    auto got = (*f)({x, y});
    ASSERT_TRUE(got.ok());
    ASSERT_TRUE((*got)[0].backward().ok());
    EXPECT_EQ(TakeGrads(model, x), eager) << rows;
  }
  // 12 verifies and 16 is a size checked: neither is a recompile.
  EXPECT_EQ(f->compiles(), 2);
  EXPECT_THAT(f->Explain(), HasSubstr("input 0 dim 0, input 1 dim 0"));
}

// [N, 8] x [8, N] holds N^2 elements: two sizes fit a line, the third does
// not, so sizes stay static; dynamic=false never generalizes.
TEST(Compile, SizesThatAreNotAffineStayStatic) {
  const Device d = Cpu();
  auto gram =
      [](const std::vector<Tensor>& in) -> absl::StatusOr<std::vector<Tensor>> {
    MIXRT_ASSIGN_OR_RETURN(Tensor t, in[0].transpose(0, 1));
    MIXRT_ASSIGN_OR_RETURN(Tensor g, matmul(in[0], t));
    return std::vector<Tensor>{g};
  };
  InferenceModeGuard inference;
  auto f = compile(gram);
  auto never = compile(gram, {.dynamic = false});
  for (int64_t rows : {2, 4, 6, 8}) {
    Generator g(rows);
    const std::vector<Tensor> in = {
        *randn({rows, 8}, DType::kF32, d, 0, 1, &g)};
    auto got = (*f)(in);
    ASSERT_TRUE(got.ok());
    EXPECT_EQ(Bytes((*got)[0]), Bytes((*gram(in))[0])) << rows;
    ASSERT_TRUE((*never)(in).ok());
  }
  // 2, 4 and 8 compile; 6 only verified (and refuted) the formulas.
  EXPECT_EQ(f->compiles(), 3);
  EXPECT_THAT(f->Explain(), HasSubstr("does not match the formulas"));
  EXPECT_EQ(never->compiles(), 4);
  EXPECT_THAT(never->Explain(), Not(HasSubstr("dynamic size")));
}

// Regional compilation: two instances of one module type (same parameter
// names, shapes, dtypes) share graphs; the second runs the first one's
// graph on its own parameters without a trace, forward and backward.
TEST(Compile, InstancesOfOneModuleShareGraphs) {
  const Device d = Cpu();
  Generator g1(1), g2(2);
  auto a = *nn::MLP({16, 24, 8}, d, &g1);
  auto b = *nn::MLP({16, 24, 8}, d, &g2);
  auto ca = compile(a, {.share_across_instances = true});
  auto cb = compile(b, {.share_across_instances = true});
  ASSERT_TRUE(ca.ok() && cb.ok());
  // Without the opt-in, a third instance traces its own graph.
  Generator g3(3);
  auto c = *nn::MLP({16, 24, 8}, d, &g3);
  auto cc = compile(c);
  const Tensor probe = *randn({5, 16}, DType::kF32, d);
  ASSERT_TRUE((*cc)(probe).ok());
  EXPECT_EQ(cc->compiled().compiles(), 1);
  const Tensor x = *randn({5, 16}, DType::kF32, d);
  for (int call = 0; call < 2; ++call) {
    for (auto [module, compiled] : {std::pair{a, &*ca}, std::pair{b, &*cb}}) {
      auto got = (*compiled)(x);
      ASSERT_TRUE(got.ok()) << got.status();
      auto want = module->forward(x);
      EXPECT_EQ(Bytes(*got), Bytes(*want));
      // Gradients into this instance's own parameters.
      ASSERT_TRUE((*sum(*want)).backward().ok());
      std::vector<std::vector<uint8_t>> eager;
      for (Tensor& p : module->parameters()) {
        eager.push_back(Bytes(p.grad()));
        p.set_grad(Tensor());
      }
      ASSERT_TRUE((*sum(*got)).backward().ok());
      std::vector<std::vector<uint8_t>> compiled_grads;
      for (Tensor& p : module->parameters()) {
        ASSERT_TRUE(p.grad().defined());
        compiled_grads.push_back(Bytes(p.grad()));
        p.set_grad(Tensor());
      }
      EXPECT_EQ(compiled_grads, eager) << "call " << call;
    }
  }
  EXPECT_EQ(ca->compiled().compiles() + cb->compiled().compiles(), 1);
  EXPECT_THAT(ca->compiled().Explain() + cb->compiled().Explain(),
              HasSubstr("reused the graph another instance"));
}

TEST(Compile, HostDataWrittenByTheFunctionIsReplayed) {
  const Device d = Cpu();
  auto offsets = [&](const std::vector<Tensor>& in)
      -> absl::StatusOr<std::vector<Tensor>> {
    MIXRT_ASSIGN_OR_RETURN(Tensor c,
                           from_floats({1, 2, 3, 4}, {4}, DType::kF32, d));
    MIXRT_ASSIGN_OR_RETURN(Tensor out, add(in[0], c));
    return std::vector<Tensor>{out};
  };
  InferenceModeGuard inference;
  auto f = compile(offsets, {.mode = "reduce-overhead"});
  const Tensor x = *from_floats({10, 20, 30, 40}, {4}, DType::kF32, d);
  for (int i = 0; i < 3; ++i) {
    auto got = (*f)({x});
    ASSERT_TRUE(got.ok());
    EXPECT_EQ(*(*got)[0].to_float_vector(),
              (std::vector<float>{11, 22, 33, 44}));
  }
  EXPECT_EQ(f->replays(), 2);
  EXPECT_THAT(f->Explain(), HasSubstr("host_write(16 bytes)"));
}

TEST(Compile, DisableAndTheEagerBackendRunAsWritten) {
  const Device d = Cpu();
  const Mlp mlp(d);
  InferenceModeGuard inference;
  const std::vector<Tensor> in = {Input(d, 2, 1)};
  auto off = compile(mlp, {.disable = true});
  auto eager = compile(mlp, {.backend = "eager"});
  for (int i = 0; i < 2; ++i) {
    ASSERT_TRUE((*off)(in).ok());
    ASSERT_TRUE((*eager)(in).ok());
  }
  EXPECT_EQ(off->compiles() + eager->compiles(), 0);
  EXPECT_EQ(off->eager_calls() + eager->eager_calls(), 4);
  setenv("MIXRT_COMPILE_DISABLE", "1", 1);
  auto env = compile(mlp);
  ASSERT_TRUE((*env)(in).ok());
  unsetenv("MIXRT_COMPILE_DISABLE");
  EXPECT_EQ(env->compiles(), 0);
}

TEST(Compile, EagerErrorsAndBadOptionsAreValues) {
  const Device d = Cpu();
  auto fails =
      [](const std::vector<Tensor>& in) -> absl::StatusOr<std::vector<Tensor>> {
    MIXRT_ASSIGN_OR_RETURN(Tensor out, matmul(in[0], in[0]));  // [4,32]x[4,32]
    return std::vector<Tensor>{out};
  };
  auto f = compile(fails);
  auto eager = fails({Input(d, 4, 1)});
  auto compiled = (*f)({Input(d, 4, 1)});
  ASSERT_FALSE(eager.ok());
  EXPECT_EQ(compiled.status(), eager.status());
  EXPECT_THAT(compile(fails, {.mode = "fast"}).status().message(),
              HasSubstr("unknown mode \"fast\""));
  EXPECT_THAT(compile(fails, {.backend = "inductor"}).status().message(),
              HasSubstr("unknown backend"));
  EXPECT_THAT(compile(fails, {.recompile_limit = 0}).status().message(),
              HasSubstr("recompile_limit"));
}

}  // namespace
}  // namespace mixrt
