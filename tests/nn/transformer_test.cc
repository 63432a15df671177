// The transformer modules: MultiheadAttention against its definition
// written out in double from the module's own parameters, PyTorch's
// parameter names (and weight tying), and a small GPT that learns a
// sequence.
#include "core/nn/transformer.h"

#include <cmath>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/functional/ops.h"
#include "core/kernels/fill_copy.h"
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

// torch.nn.MultiheadAttention(4, 2, batch_first=True) with the same
// parameters and inputs (PyTorch 2.15, seed 3, by hand): cross-attention,
// a bool key_padding_mask and a bool [L, S] attn_mask (true: not allowed),
// the output and the head-averaged weights; without need_weights the same
// output through the fused kernel.
TEST(MultiheadAttention, CrossAttentionWithMasksMatchesPyTorch) {
  const Device d = testing::ReferenceDevice();
  auto mha = MultiheadAttention::Create(4, 2, d);
  ASSERT_TRUE(mha.ok()) << mha.status();
  const std::map<std::string, std::vector<float>> params = {
      {"in_proj_weight",
       {0.181642443,  -0.349349022,  0.550284028,   -0.597542405,  -0.390844017,
        -0.382469267, -0.253834873,  0.122105427,   -0.463865668,  -0.471776873,
        -0.292861462, 0.37375775,    -0.441689432,  -0.549234569,  -0.530748367,
        -0.301339447, -0.160899714,  -0.607076108,  -0.286705166,  0.0117805991,
        0.100946024,  -0.0877890736, -0.0694339722, -0.39839381,   0.313722074,
        -0.147523537, -0.418689311,  -0.1474742,    -0.0855518207, 0.566203058,
        0.319142878,  -0.247268409,  -0.0868783891, 0.541134775,   0.393410563,
        0.152685553,  -0.219668031,  0.509540975,   0.262358934,   -0.272735357,
        0.434575677,  0.0436454564,  -0.452884048,  -0.27142632,   -0.458629936,
        -0.50719738,  0.0149705019,  -0.43884477}},
      {"in_proj_bias",
       {0.134203553, 0.146200374, 0.0436160974, 0.101701356, -0.219252691,
        0.0212330669, -0.093949683, -0.0323578268, -0.105471089, 0.0823772773,
        -0.0527050197, 0.0810725912}},
      {"out_proj.weight",
       {-0.49573648, -0.394430637, -0.214157522, -0.47304517, -0.0283856392,
        -0.439883709, 0.271865845, 0.243699372, 0.0944212079, 0.387856662,
        -0.0489686728, 0.299490631, -0.350159109, -0.0985311866, -0.445823073,
        -0.0405947566}},
      {"out_proj.bias",
       {-0.0804592595, -0.105006419, -0.0109653566, 0.035296727}}};
  for (auto& [name, p] : (*mha)->named_parameters()) {
    const std::vector<float>& v = params.at(name);
    const std::vector<int64_t> shape(p.shape().begin(), p.shape().end());
    ASSERT_TRUE(kernels::copy_(p, testing::MakeTensor(d, v, shape)).ok())
        << name;
  }
  const Tensor q = testing::MakeTensor(
      d,
      {0.393155128, 0.918304861,   -0.260355592, 0.0509925708,   0.662293971,
       0.622912824, 0.446291804,   0.768811703,  0.000443184137, -0.577350318,
       1.00481546,  -0.946484208,  -0.126346514, 0.311359942,    2.46668792,
       -1.0854398,  -0.0501726978, 0.545693934,  1.00365329,     -0.667911768,
       -1.01386464, -1.19001031,   0.463432789,  0.47954601},
      {2, 3, 4});
  const Tensor k = testing::MakeTensor(
      d,
      {-0.00491010398, 1.18132401,   0.749763012, 1.46987259,    -0.79274404,
       1.05468535,     1.29112291,   0.159980744, -0.191827372,  -0.12418174,
       0.956276655,    -0.114818819, -0.40963158, -0.0351312235, -0.531358957,
       0.0776291341,   1.78826749,   1.2003783,   -0.106462456,  -0.708240747,
       -0.456682384,   -0.864037871, -1.42766178, -1.44908977,   0.991835296,
       0.12247885,     -1.39981294,  0.515250146, 0.0212027673,  0.917011857,
       -0.0092964042,  -0.827247441},
      {2, 4, 4});
  const Tensor v = testing::MakeTensor(
      d,
      {0.258169264,  -1.39631116,  1.18731403,    1.55445266,   -0.655515611,
       -1.74483025,  -1.04845095,  0.326874346,   -0.106383495, -0.597474039,
       -0.457812071, -0.456923217, -0.351923555,  -0.971497238, -1.57649934,
       -0.682328343, -0.29333213,  -0.872549534,  -0.404433906, 0.556132793,
       0.336219907,  0.576644957,  0.202812925,   1.57718539,   -0.0525458492,
       -0.798479378, 2.72760344,   -0.0928819776, 0.616232932,  -1.12902057,
       -1.49755716,  -0.662856102},
      {2, 4, 4});
  MultiheadAttentionForwardOptions o;
  o.key_padding_mask =
      *from_ints({0, 0, 0, 1, 0, 1, 0, 0}, {2, 4}, DType::kBool, d);
  o.attn_mask =
      *from_ints({0, 1, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0}, {3, 4}, DType::kBool, d);
  auto out = (*mha)->forward(q, k, v, o);
  ASSERT_TRUE(out.ok()) << out.status();
  const std::vector<double> want_out = {
      0.257617652,   0.117255367,   -0.144353196, 0.381194234,   0.353070349,
      0.284503669,   -0.177236602,  0.44993487,   0.106221624,   0.363278657,
      -0.0116974581, 0.323113739,   -0.305557758, -0.0649688616, 0.192474246,
      0.132580727,   -0.0991838351, 0.0568953082, 0.0785397515,  0.211952329,
      -0.0403114781, 0.127911866,   0.0529553294, 0.23133409};
  testing::ExpectClose(testing::Values(out->output), want_out, 1e-6, 1e-6,
                       "output");
  EXPECT_EQ(out->weights.shape(), Shape({2, 3, 4}));
  testing::ExpectClose(
      testing::Values(out->weights),
      std::vector<double>{0.537998319, 0,           0.462001622, 0,
                          0.362696677, 0.300779521, 0.336523861, 0,
                          0,           0.439727157, 0.560272813, 0,
                          0.16661182,  0,           0.559413254, 0.273974955,
                          0.244099945, 0,           0.433998287, 0.321901798,
                          0,           0,           0.485156953, 0.514842987},
      1e-6, 1e-6, "weights");
  o.need_weights = false;
  auto fused = (*mha)->forward(q, k, v, o);
  ASSERT_TRUE(fused.ok()) << fused.status();
  EXPECT_FALSE(fused->weights.defined());
  testing::ExpectClose(testing::Values(fused->output), want_out, 1e-6, 1e-6,
                       "output without weights");
  o.need_weights = true;
  o.average_attn_weights = false;
  EXPECT_EQ((*mha)->forward(q, k, v, o)->weights.shape(), Shape({2, 2, 3, 4}));
  o.key_padding_mask = *zeros({2, 3}, DType::kBool, d);
  EXPECT_THAT((*mha)->forward(q, k, v, o).status().message(),
              HasSubstr("key_padding_mask is [2, 3]; expected [2, 4]"));
}

// Self-attention takes one stacked projection GEMM, cross-attention one
// third each: the same attention on equal inputs, within f32 rounding of
// two GEMM shapes.
TEST(MultiheadAttention, SelfAttentionsPackedProjectionMatchesTheThirds) {
  const Device d = testing::ReferenceDevice();
  Generator g(4);
  auto mha = MultiheadAttention::Create(8, 2, d, &g);
  ASSERT_TRUE(mha.ok()) << mha.status();
  const Tensor x = *randn({2, 5, 8}, DType::kF32, d, 0, 1, &g);
  const Tensor same_values = *x.clone();
  MultiheadAttentionForwardOptions o;
  o.need_weights = false;
  auto packed = (*mha)->forward(x, x, x, o);
  auto thirds = (*mha)->forward(x, same_values, same_values, o);
  ASSERT_TRUE(packed.ok() && thirds.ok());
  testing::ExpectClose(testing::Values(packed->output),
                       testing::Values(thirds->output), 1e-6, 1e-6,
                       "packed vs thirds");
  EXPECT_EQ(testing::Values((*mha)->forward(x)),
            testing::Values(packed->output));
}

// A module that drops out keeps drawing from its creator's stream after
// the creator's Generator object is gone (it held a raw pointer, read
// after free, before it shared the stream): the same masks a generator
// with the same seed gives, in order.
TEST(Dropout, ModulesKeepDrawingAfterTheirGeneratorIsDestroyed) {
  const Device d = testing::ReferenceDevice();
  Tensor x = *ones({4, 16, 8}, DType::kF32, d);
  auto creator = std::make_unique<Generator>(11);
  Dropout dropout(0.5, creator.get());
  TransformerBlockOptions o;
  o.width = 8;
  o.heads = 2;
  o.dropout = 0.3;
  auto block = *TransformerBlock::Create(o, d, creator.get());
  // Block creation drew its initial weights from the stream: where the
  // modules' draws start.
  const uint64_t offset = creator->offset();
  creator.reset();

  Generator same(11);
  same.set_state(11, offset);
  const std::vector<double> first = Dense(*dropout.forward(x));
  EXPECT_EQ(first, Dense(*mixrt::dropout(x, 0.5, &same)));
  const std::vector<double> second = Dense(*dropout.forward(x));
  EXPECT_EQ(second, Dense(*mixrt::dropout(x, 0.5, &same)));
  EXPECT_NE(first, second);
  // The block (attention and MLP dropout) draws too, without the creator
  // (under ASan, the sanitizer stage, a dangling read fails here).
  block->train(true);
  EXPECT_TRUE(block->forward(x).ok());
}

}  // namespace
}  // namespace mixrt::nn
