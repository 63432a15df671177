// The CPU plugin's GEMM epilogues and layer_norm + cast fusion under bf16
// autocast, compiled against eager: a linear's GELU runs as a oneDNN
// post-op on the f32 product (eager rounds the product to bf16 first), so
// the results agree within bf16's rounding of what each element sums, not
// bit for bit; a NaN in the input still reaches the output (the GradScaler
// must see an overflow), and a layer_norm writing its bf16 cast directly is
// eager's bit for bit, as are an attention reading its heads in place and a
// layer_norm_backward reading its bf16 gradient and adding the residual's.
#include <cmath>
#include <cstdlib>
#include <string>
#include <tuple>
#include <vector>

#include "absl/status/statusor.h"
#include "core/amp/autocast/autocast.h"
#include "core/autograd/grad_mode.h"
#include "core/compiler/compile.h"
#include "core/functional/ops.h"
#include "core/tensor/factories.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "mixrt/status_macros.h"
#include "tests/testing/test_plugins.h"

namespace mixrt {
namespace {

using ::testing::ContainsRegex;
using ::testing::HasSubstr;

constexpr double kBf16Roundoff = 1.0 / 256;  // 2^-8: 8 significant bits.

struct Block {
  Tensor ln_w, ln_b, w1, b1, w2, b2;
  explicit Block(const Device& d) {
    Generator g(11);
    ln_w = *randn({48}, DType::kF32, d, 1, 0.1, &g);
    ln_b = *randn({48}, DType::kF32, d, 0, 0.1, &g);
    w1 = *randn({96, 48}, DType::kF32, d, 0, 0.2, &g);
    b1 = *randn({96}, DType::kF32, d, 0, 0.2, &g);
    w2 = *randn({48, 96}, DType::kF32, d, 0, 0.2, &g);
    b2 = *randn({48}, DType::kF32, d, 0, 0.2, &g);
  }
  // x + linear(gelu(linear(layer_norm(x)))): a transformer's MLP half.
  absl::StatusOr<std::vector<Tensor>> operator()(
      const std::vector<Tensor>& in) const {
    MIXRT_ASSIGN_OR_RETURN(Tensor h, layer_norm(in[0], 1, ln_w, ln_b));
    MIXRT_ASSIGN_OR_RETURN(Tensor normalized, h.to(DType::kBF16));
    MIXRT_ASSIGN_OR_RETURN(h, linear(h, w1, b1));
    MIXRT_ASSIGN_OR_RETURN(h, gelu(h));
    MIXRT_ASSIGN_OR_RETURN(h, linear(h, w2, b2));
    MIXRT_ASSIGN_OR_RETURN(Tensor out, add(in[0], h));
    return std::vector<Tensor>{out, normalized};
  }
};

int CountSubstr(const std::string& s, const std::string& part) {
  int n = 0;
  for (size_t at = s.find(part); at != std::string::npos;
       at = s.find(part, at + 1))
    ++n;
  return n;
}

// The bytes of the leaves' gradients after y.backward(g_out), one after
// the other; the gradients are cleared for the next call.
absl::StatusOr<std::vector<uint8_t>> GradientBytes(const Tensor& y,
                                                   const Tensor& g_out,
                                                   std::vector<Tensor> leaves) {
  MIXRT_RETURN_IF_ERROR(y.backward(g_out, /*retain_graph=*/false));
  std::vector<uint8_t> all;
  for (Tensor& t : leaves) {
    MIXRT_ASSIGN_OR_RETURN(std::vector<uint8_t> bytes, t.grad().to_bytes());
    all.insert(all.end(), bytes.begin(), bytes.end());
    t.set_grad(Tensor());
  }
  return all;
}

std::vector<double> Values(const Tensor& t) {
  const std::vector<float> f = *t.to_float_vector();
  return std::vector<double>(f.begin(), f.end());
}

TEST(CpuFusionNumerics, GemmEpiloguesStayWithinBf16OfEagerAndKeepNaN) {
  const Device d = testing::CpuDevice();
  const Block block(d);
  InferenceModeGuard inference;
  AutocastGuard autocast("cpu", DType::kBF16);
  auto f = compile(block);
  ASSERT_TRUE(f.ok()) << f.status();
  Generator g(3);
  Tensor x = *randn({2, 8, 48}, DType::kF32, d, 0, 1, &g);
  std::vector<float> xs = *x.to_float_vector();
  xs[5] = std::nanf("");  // Row 0 of batch 0.
  x = *from_floats(xs, {2, 8, 48}, DType::kF32, d);
  ASSERT_TRUE((*f)({x}).ok());  // The trace.
  auto got = (*f)({x});
  ASSERT_TRUE(got.ok()) << got.status();
  auto want = block({x});
  ASSERT_TRUE(want.ok());
  const std::string explain = f->Explain();
  // The GEMMs fuse their epilogues where bf16 matmul is native; where it
  // is emulated (CPUs without avx512_bf16 or AMX) they run op by op, and
  // the numbers below hold all the same.
  if (testing::CpuRunsNatively(MIXRT_OP_CLASS_MATMUL, DType::kBF16)) {
    EXPECT_THAT(explain, ::testing::ContainsRegex(
                             "oneDNN matmul.* \\+ post-ops gelu_erf -> bf16"));
  } else {
    EXPECT_THAT(explain, ::testing::Not(HasSubstr("oneDNN matmul")));
  }
  EXPECT_THAT(explain, HasSubstr("layer_norm writing its cast (bf16)"));
  // Its f32 result reaches the cast through a reshape view ([16, 48] to
  // [2, 8, 48]) and nothing else reads it: a plain reshape, so the group
  // stores the cast alone (plugin_api.h), not 3 KiB of f32 nobody reads.
  EXPECT_THAT(
      explain,
      ::testing::ContainsRegex(
          "\n  out[0-9]+:bf16\\[2, 8, 48\\] = fused\\[layer_norm writing"));

  // The bf16 layer_norm result: bit for bit.
  EXPECT_EQ(*(*got)[1].to_bytes(), *(*want)[1].to_bytes());

  // out = x + W2 gelu(W1 n + b1) + b2: eager rounds W1 n + b1 and the GELU
  // to bf16 where the fused epilogue does not, and both round the second
  // product, so each differs from the exact value by a few bf16 roundings
  // of the magnitudes the second product sums.
  const std::vector<double> o = Values((*got)[0]), e = Values((*want)[0]);
  const std::vector<double> w2 = Values(block.w2), b2 = Values(block.b2);
  const std::vector<double> n = Values((*want)[1]), w1 = Values(block.w1),
                            b1 = Values(block.b1), xv = Values(x);
  for (int64_t r = 0; r < 16; ++r) {
    std::vector<double> h(96);
    for (int j = 0; j < 96; ++j) {
      double dot = b1[j];
      for (int k = 0; k < 48; ++k) dot += n[r * 48 + k] * w1[j * 48 + k];
      h[j] = std::fabs(0.5 * dot * std::erfc(-dot / std::sqrt(2.0))) +
             std::fabs(dot) * kBf16Roundoff;
    }
    for (int c = 0; c < 48; ++c) {
      const int64_t i = r * 48 + c;
      if (r == 0) {  // The NaN's row.
        EXPECT_TRUE(std::isnan(o[i]) && std::isnan(e[i]))
            << i << ": " << o[i] << " " << e[i];
        continue;
      }
      double magnitude = std::fabs(b2[c]) + std::fabs(xv[i]);
      for (int j = 0; j < 96; ++j)
        magnitude += std::fabs(w2[c * 96 + j]) * h[j];
      EXPECT_NEAR(o[i], e[i], 4 * kBf16Roundoff * magnitude) << "element " << i;
    }
  }
}

TEST(CpuFusionNumerics, FusionOffRunsOpByOp) {
  const Device d = testing::CpuDevice();
  const Block block(d);
  setenv("MIXRT_COMPILE_FUSION", "0", 1);
  InferenceModeGuard inference;
  AutocastGuard autocast("cpu", DType::kBF16);
  auto f = compile(block);
  ASSERT_TRUE(f.ok());
  Generator g(4);
  const Tensor x = *randn({2, 8, 48}, DType::kF32, d, 0, 1, &g);
  ASSERT_TRUE((*f)({x}).ok());
  auto got = (*f)({x});
  unsetenv("MIXRT_COMPILE_FUSION");
  ASSERT_TRUE(got.ok());
  auto want = block({x});
  ASSERT_TRUE(want.ok());
  EXPECT_EQ(*(*got)[0].to_bytes(), *(*want)[0].to_bytes());
  EXPECT_THAT(f->Explain(), ::testing::Not(HasSubstr("post-ops")));
}

// A multi-head attention's head split as the module writes it: q, k and v
// as strided views of the packed projection [B, T, 3, H, D], made dense by
// three copies for the attention.
absl::StatusOr<std::vector<Tensor>> SplitHeadsAttention(
    const std::vector<Tensor>& in) {
  const int64_t b = in[0].shape()[0], t = in[0].shape()[1];
  MIXRT_ASSIGN_OR_RETURN(Tensor qkv, reshape(in[0], {b, t, 3, 4, 16}));
  MIXRT_ASSIGN_OR_RETURN(qkv, permute(qkv, {2, 0, 3, 1, 4}));
  MIXRT_ASSIGN_OR_RETURN(std::vector<Tensor> parts, split(qkv, 1, 0));
  std::vector<Tensor> heads;
  for (const Tensor& p : parts) {
    MIXRT_ASSIGN_OR_RETURN(Tensor h, reshape(p, {b, 4, t, 16}));
    heads.push_back(h);
  }
  AttentionOptions options;
  options.is_causal = true;
  MIXRT_ASSIGN_OR_RETURN(Tensor y, scaled_dot_product_attention(
                                       heads[0], heads[1], heads[2], options));
  return std::vector<Tensor>{y};
}

// SplitHeadsAttention's result with its heads merged back, [B, T, H * D],
// as the module hands it to the output projection: a permute and the copy
// a reshape of it makes.
absl::StatusOr<std::vector<Tensor>> MergedHeadsAttention(
    const std::vector<Tensor>& in) {
  MIXRT_ASSIGN_OR_RETURN(std::vector<Tensor> y, SplitHeadsAttention(in));
  const int64_t b = in[0].shape()[0], t = in[0].shape()[1];
  MIXRT_ASSIGN_OR_RETURN(Tensor merged, permute(y[0], {0, 2, 1, 3}));
  MIXRT_ASSIGN_OR_RETURN(merged, reshape(merged, {b, t, 64}));
  // A second reader of the merged heads: the copy's result is stored.
  MIXRT_ASSIGN_OR_RETURN(Tensor doubled, add(merged, merged));
  return std::vector<Tensor>{merged, doubled};
}

// The copy merging the heads runs inside the attention's kernel too: each
// row written where the copy would put it, eager's bytes.
TEST(CpuFusionNumerics, AttentionWritesItsHeadsMergedInPlace) {
  const Device d = testing::CpuDevice();
  Generator g(6);
  for (const int64_t tokens : {150, 3}) {
    const Tensor x = *randn({2, tokens, 192}, DType::kBF16, d, 0, 1, &g);
    InferenceModeGuard inference;
    auto f = compile(MergedHeadsAttention);
    ASSERT_TRUE(f.ok()) << f.status();
    ASSERT_TRUE((*f)({x}).ok());  // The trace.
    auto got = (*f)({x});
    ASSERT_TRUE(got.ok()) << got.status();
    auto want = MergedHeadsAttention({x});
    ASSERT_TRUE(want.ok());
    EXPECT_THAT(f->Explain(), HasSubstr("attention reading and writing its "
                                        "heads in place (4 copies fused)"))
        << tokens << " tokens";
    for (int i = 0; i < 2; ++i) {
      EXPECT_THAT((*got)[i].shape(), ::testing::ElementsAre(2, tokens, 64));
      EXPECT_EQ(*(*got)[i].to_bytes(), *(*want)[i].to_bytes())
          << tokens << " tokens, " << i;
    }
  }
}

// In inference the copies run inside the attention's fused kernel, which
// reads each head's rows where the projection wrote them: the same kernel
// on the same values, so eager's result bit for bit. In training the
// copies are saved for the backward and stay copies; the backward's
// gradients of q, k and v, which autograd stacks for the split with three
// copies, are written by the attention's backward where the copies put
// them: eager's gradient bit for bit, three copies fewer.
TEST(CpuFusionNumerics,
     AttentionReadsItsHeadsInPlaceAndItsBackwardWritesTheirGradientsInPlace) {
  const Device d = testing::CpuDevice();
  Generator g(5);
  const Tensor x = *randn({2, 150, 192}, DType::kBF16, d, 0, 1, &g);
  {
    InferenceModeGuard inference;
    auto f = compile(SplitHeadsAttention);
    ASSERT_TRUE(f.ok()) << f.status();
    ASSERT_TRUE((*f)({x}).ok());  // The trace.
    auto got = (*f)({x});
    ASSERT_TRUE(got.ok()) << got.status();
    auto want = SplitHeadsAttention({x});
    ASSERT_TRUE(want.ok());
    EXPECT_THAT(
        f->Explain(),
        HasSubstr("attention reading its heads in place (3 copies fused)"));
    EXPECT_EQ(*(*got)[0].to_bytes(), *(*want)[0].to_bytes());
  }
  Tensor trained = *x.clone();
  ASSERT_TRUE(trained.set_requires_grad(true).ok());
  auto f = compile(SplitHeadsAttention);
  ASSERT_TRUE(f.ok());
  const Tensor g_out = *randn({2, 4, 150, 16}, DType::kBF16, d, 0, 1, &g);
  auto gradient = [&](const std::vector<Tensor>& y) {
    return GradientBytes(y[0], g_out, {trained});
  };
  auto eager = SplitHeadsAttention({trained});
  ASSERT_TRUE(eager.ok());
  auto want = gradient(*eager);
  ASSERT_TRUE(want.ok()) << want.status();
  for (int call = 0; call < 2; ++call) {
    auto y = (*f)({trained});
    ASSERT_TRUE(y.ok()) << y.status();
    auto got = gradient(*y);
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_EQ(*got, *want) << "call " << call;
  }
  EXPECT_THAT(f->Explain(),
              ::testing::Not(HasSubstr("attention reading its heads")));
  EXPECT_THAT(f->Explain(),
              HasSubstr("(3 copies written in place by their producers)"));
  EXPECT_THAT(f->Explain(),
              ContainsRegex("buf[0-9]+:bf16\\[8, 150, 16\\], "
                            "buf[0-9]+\\+19200:bf16\\[8, 150, 16\\], "
                            "buf[0-9]+\\+38400:bf16\\[8, 150, 16\\] = "
                            "scaled_dot_product_attention_backward"));
}

// Two pre-norm residual halves under bf16 autocast, as a transformer block
// chains them: h = x + W1 ln1(x), y = h + W2 ln2(h). The products are
// results too, so no GEMM adds the residual in its epilogue (before the
// bf16 rounding eager does first): the forward is eager's bit for bit, and
// so must the gradients be.
struct PreNormPair {
  std::vector<Tensor> params;  // ln1 w, b, W1, ln2 w, b, W2.
  explicit PreNormPair(const Device& d) {
    Generator g(17);
    for (auto [shape, mean, std] :
         std::vector<std::tuple<std::vector<int64_t>, double, double>>{
             {{48}, 1, 0.1},
             {{48}, 0, 0.1},
             {{48, 48}, 0, 0.2},
             {{48}, 1, 0.1},
             {{48}, 0, 0.1},
             {{48, 48}, 0, 0.2}}) {
      Tensor p = *randn(shape, DType::kF32, d, mean, std, &g);
      EXPECT_TRUE(p.set_requires_grad(true).ok());
      params.push_back(p);
    }
  }
  absl::StatusOr<std::vector<Tensor>> operator()(
      const std::vector<Tensor>& in) const {
    std::vector<Tensor> out = {in[0]};
    for (int half = 0; half < 2; ++half) {
      const Tensor* p = &params[3 * half];
      MIXRT_ASSIGN_OR_RETURN(Tensor n, layer_norm(out[0], 1, p[0], p[1]));
      MIXRT_ASSIGN_OR_RETURN(n, linear(n, p[2], Tensor()));
      MIXRT_ASSIGN_OR_RETURN(out[0], add(out[0], n));
      out.push_back(n);
    }
    return out;
  }
};

// The backward of each layer_norm reads its gradient as the bf16 linear
// backward wrote it (autocast widens it to f32 first; exact), adds the
// residual branch's f32 gradient, and writes the sum's bf16 cast that the
// next linear backward reads, where one reads it alone; the first one's
// input gradient is not computed when x needs none. Eager's gradients bit
// for bit either way.
TEST(CpuFusionNumerics,
     LayerNormBackwardReadsItsBf16GradientAndAddsTheResidualsBitForBit) {
  const Device d = testing::CpuDevice();
  const PreNormPair net(d);
  Generator g(23);
  const Tensor g_out = *randn({2, 8, 48}, DType::kF32, d, 0, 1, &g);
  for (bool x_grad : {false, true}) {
    SCOPED_TRACE(x_grad ? "x needs its gradient" : "x needs no gradient");
    Tensor x = *randn({2, 8, 48}, DType::kF32, d, 0, 1, &g);
    ASSERT_TRUE(x.set_requires_grad(x_grad).ok());
    std::vector<Tensor> leaves = net.params;
    if (x_grad) leaves.push_back(x);
    auto gradients = [&](const std::vector<Tensor>& y) {
      return GradientBytes(y[0], g_out, leaves);
    };
    AutocastGuard autocast("cpu", DType::kBF16);
    auto eager = net({x});
    ASSERT_TRUE(eager.ok()) << eager.status();
    auto want = gradients(*eager);
    ASSERT_TRUE(want.ok()) << want.status();
    auto f = compile(net);
    ASSERT_TRUE(f.ok()) << f.status();
    for (int call = 0; call < 2; ++call) {
      auto y = (*f)({x});
      ASSERT_TRUE(y.ok()) << y.status();
      auto got = gradients(*y);
      ASSERT_TRUE(got.ok()) << got.status();
      EXPECT_EQ(*got, *want) << "call " << call;
    }
    const std::string explain = f->Explain();
    EXPECT_THAT(explain, ::testing::Not(HasSubstr("post-ops")));
    if (x_grad) {
      // The sum of the second half's gradients is read twice (the residual
      // path to x and the first linear's backward): written in f32, its
      // cast stays a copy; the first layer_norm_backward writes x's.
      EXPECT_EQ(CountSubstr(explain,
                            "layer_norm_backward reading its gradient as bf16, "
                            "adding the residual gradient]"),
                2)
          << explain;
    } else {
      EXPECT_THAT(
          explain,
          HasSubstr("layer_norm_backward reading its gradient as bf16, adding "
                    "the residual gradient and writing its cast (bf16)]"));
      EXPECT_THAT(
          explain,
          ContainsRegex(
              "\n  out[0-9]+:f32\\[48\\], out[0-9]+:f32\\[48\\] = "
              "fused\\[layer_norm_backward reading its gradient as bf16\\]"));
    }
  }
}

}  // namespace
}  // namespace mixrt
