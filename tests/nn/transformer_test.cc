// The transformer modules: MultiheadAttention against its definition
// written out in double from the module's own parameters, PyTorch's
// parameter names (and weight tying), and a small GPT that learns a
// sequence.
#include "core/nn/transformer.h"

#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "core/functional/ops.h"
#include "core/optim/optimizer.h"
#include "core/tensor/factories.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/op_test_util.h"
#include "tests/testing/test_plugins.h"

namespace mixrt::nn {
namespace {

using ::testing::Contains;
using ::testing::HasSubstr;
using ::testing::Key;
using ::testing::Not;

std::vector<double> Dense(const Tensor& t) { return *t.to_double_vector(); }

TEST(MultiheadAttention, MatchesItsDefinition) {
  const Device d = testing::ReferenceDevice();
  const int b = 2, t = 4, e = 6, h = 2, hd = 3;
  Generator gen(3);
  auto mha = MultiheadAttention::Create(e, h, d, &gen, 0, /*is_causal=*/true);
  ASSERT_TRUE(mha.ok()) << mha.status();
  std::map<std::string, std::vector<double>> p;
  for (const auto& [name, value] : (*mha)->named_parameters()) {
    p[name] = Dense(value);
  }
  ASSERT_EQ(p.size(), 4u);
  // Make the zero-initialized biases matter.
  const auto xv = testing::RandomValues(b * t * e, 9);
  Tensor x = testing::MakeTensor(d, xv, {b, t, e});
  absl::StatusOr<Tensor> y = (*mha)->forward(x);
  ASSERT_TRUE(y.ok()) << y.status();

  const auto& w = p["in_proj_weight"];
  const auto& bias = p["in_proj_bias"];
  std::vector<double> want(b * t * e, 0);
  for (int bb = 0; bb < b; ++bb) {
    // qkv[r][c] = x[r] . w[c] + bias[c], c in [0, 3e).
    std::vector<std::vector<double>> qkv(t, std::vector<double>(3 * e));
    for (int r = 0; r < t; ++r)
      for (int c = 0; c < 3 * e; ++c) {
        double acc = bias[c];
        for (int i = 0; i < e; ++i)
          acc += xv[(bb * t + r) * e + i] * w[c * e + i];
        qkv[r][c] = acc;
      }
    std::vector<std::vector<double>> heads(t, std::vector<double>(e, 0));
    for (int hh = 0; hh < h; ++hh) {
      for (int i = 0; i < t; ++i) {
        std::vector<double> s(t, -INFINITY);
        double max = -INFINITY;
        for (int j = 0; j <= i; ++j) {
          double dot = 0;
          for (int c = 0; c < hd; ++c)
            dot += qkv[i][hh * hd + c] * qkv[j][e + hh * hd + c];
          s[j] = dot / std::sqrt(static_cast<double>(hd));
          max = std::max(max, s[j]);
        }
        double total = 0;
        for (int j = 0; j <= i; ++j) total += s[j] = std::exp(s[j] - max);
        for (int j = 0; j <= i; ++j)
          for (int c = 0; c < hd; ++c)
            heads[i][hh * hd + c] += s[j] / total * qkv[j][2 * e + hh * hd + c];
      }
    }
    for (int r = 0; r < t; ++r)
      for (int c = 0; c < e; ++c) {
        double acc = p["out_proj.bias"][c];
        for (int i = 0; i < e; ++i)
          acc += heads[r][i] * p["out_proj.weight"][c * e + i];
        want[(bb * t + r) * e + c] = acc;
      }
  }
  testing::ExpectClose(Dense(*y), want, 1e-5, 1e-6, "attention");
  EXPECT_FALSE(MultiheadAttention::Create(7, 2, d).ok());
}

TEST(GPT, HasPyTorchNamesAndATiedOutputProjection) {
  const Device d = testing::ReferenceDevice();
  auto gpt = GPT::Create(
      {.vocab_size = 11, .context = 8, .width = 8, .heads = 2, .layers = 2}, d);
  ASSERT_TRUE(gpt.ok()) << gpt.status();
  const auto params = (*gpt)->named_parameters();
  std::map<std::string, Shape> shapes;
  for (const auto& [name, t] : params) shapes[name] = t.shape();
  EXPECT_EQ(shapes["wte.weight"], (Shape{11, 8}));
  EXPECT_EQ(shapes["wpe.weight"], (Shape{8, 8}));
  EXPECT_EQ(shapes["h.1.attn.in_proj_weight"], (Shape{24, 8}));
  EXPECT_EQ(shapes["h.1.fc.weight"], (Shape{32, 8}));
  EXPECT_THAT(shapes, Contains(Key("ln_f.weight")));
  // wte, wpe, 2 x (ln_1 2, attn 4, ln_2 2, fc 2, proj 2), ln_f 2: no
  // separate output matrix.
  EXPECT_EQ(params.size(), 2u + 2 * 12 + 2);
  Tensor tokens = *from_ints({1, 2, 3}, {1, 3}, DType::kI64, d);
  absl::StatusOr<Tensor> logits = (*gpt)->forward(tokens);
  ASSERT_TRUE(logits.ok()) << logits.status();
  EXPECT_EQ(logits->shape(), (Shape{1, 3, 11}));
  Tensor long_tokens = *zeros({1, 9}, DType::kI64, d);
  EXPECT_THAT((*gpt)->forward(long_tokens).status().message(),
              HasSubstr("1 <= T <= 8"));
}

TEST(GPT, LearnsARepeatingSequence) {
  // 0 1 2 3 4 0 1 2 ...: after enough steps the next token is certain.
  const Device d = testing::ReferenceDevice();
  Generator gen(1);
  auto gpt = GPT::Create(
      {.vocab_size = 5, .context = 8, .width = 16, .heads = 2, .layers = 2}, d,
      &gen);
  ASSERT_TRUE(gpt.ok()) << gpt.status();
  AdamW opt((*gpt)->parameters(), {.lr = 1e-2, .weight_decay = 0});
  std::vector<int64_t> in, target;
  for (int b = 0; b < 4; ++b)
    for (int i = 0; i < 8; ++i) {
      in.push_back((b + i) % 5);
      target.push_back((b + i + 1) % 5);
    }
  Tensor x = *from_ints(in, {4, 8}, DType::kI64, d);
  Tensor y = *from_ints(target, {32}, DType::kI64, d);
  double first = 0, last = 0;
  for (int step = 0; step < 60; ++step) {
    absl::StatusOr<Tensor> logits = (*gpt)->forward(x);
    ASSERT_TRUE(logits.ok()) << logits.status();
    absl::StatusOr<Tensor> loss = cross_entropy(*reshape(*logits, {32, 5}), y);
    ASSERT_TRUE(loss.ok()) << loss.status();
    if (step == 0) first = *loss->item();
    last = *loss->item();
    ASSERT_TRUE(loss->backward().ok());
    ASSERT_TRUE(opt.step().ok());
    opt.zero_grad();
  }
  EXPECT_NEAR(first, std::log(5.0), 0.5) << "an untrained model guesses";
  EXPECT_LT(last, 0.05) << "from " << first;
}

}  // namespace
}  // namespace mixrt::nn
