// Factories, casts, device moves and pointwise arithmetic through the
// reference plugin, compared with the same arithmetic done here on the host.
#include <cmath>
#include <vector>

#include "absl/status/statusor.h"
#include "core/kernels/pointwise.h"
#include "core/plugin/registry.h"
#include "core/tensor/factories.h"
#include "core/tensor/op_fallback.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "plugins/sdk/philox.h"
#include "tests/testing/test_plugins.h"

namespace mixrt {
namespace {

using namespace ::mixrt::kernels;  // The ops under test.

using ::testing::ElementsAre;
using ::testing::HasSubstr;

class TensorOpsTest : public ::testing::Test {
 protected:
  void SetUp() override { device_ = testing::ReferenceDevice(); }

  Tensor Floats(std::vector<float> values, std::vector<int64_t> shape,
                DType dtype = DType::kF32) {
    auto t = from_floats(values, shape, dtype, device_);
    EXPECT_TRUE(t.ok()) << t.status();
    return *t;
  }

  static std::vector<uint16_t> Bits16(const Tensor& t) {
    auto bytes = t.to_bytes();
    EXPECT_TRUE(bytes.ok());
    std::vector<uint16_t> out(bytes->size() / 2);
    std::memcpy(out.data(), bytes->data(), bytes->size());
    return out;
  }

  Device device_;
};

TEST_F(TensorOpsTest, CastsRoundToNearestEven) {
  // IEEE encodings: 1/3 -> f16 0x3555, bf16 0x3eab; 0.1 -> 0x2e66, 0x3dcd;
  // 65520 overflows f16 to inf; 1 + 2^-11 is an f16 tie that stays at 1.
  Tensor x =
      Floats({1.0f / 3, 0.1f, 65520.0f, 1.0f + std::ldexp(1.0f, -11)}, {4});
  auto h = x.to(DType::kF16);
  auto b = x.to(DType::kBF16);
  ASSERT_TRUE(h.ok() && b.ok());
  EXPECT_THAT(Bits16(*h), ElementsAre(0x3555, 0x2e66, 0x7c00, 0x3c00));
  EXPECT_THAT(Bits16(*b), ElementsAre(0x3eab, 0x3dcd, 0x4780, 0x3f80));
  // Back to f32 is exact.
  auto back = h->to(DType::kF32);
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->to_float_vector()->at(0), 0.333251953125f);
}

TEST_F(TensorOpsTest, CastsBetweenIntegersFloatsAndBool) {
  Tensor x = Floats({-2.7f, 0.0f, 3.9f, NAN}, {4});
  auto i = x.to(DType::kI32);
  ASSERT_TRUE(i.ok());
  EXPECT_THAT(*i->to_int_vector(), ElementsAre(-2, 0, 3, 0));  // Truncation.
  auto flag = x.to(DType::kBool);
  ASSERT_TRUE(flag.ok());
  EXPECT_THAT(*flag->to_int_vector(), ElementsAre(1, 0, 1, 1));
  auto big = from_ints({int64_t{1} << 40, -5}, {2}, DType::kI64, device_);
  ASSERT_TRUE(big.ok());
  auto narrowed = big->to(DType::kI32);
  ASSERT_TRUE(narrowed.ok());
  EXPECT_THAT(*narrowed->to_int_vector(), ElementsAre(0, -5));  // Wraps.
  EXPECT_THAT(x.to_int_vector().status().message(), HasSubstr("f32"));
}

TEST_F(TensorOpsTest, FactoriesFillAndRange) {
  auto f = full({2, 2}, -1.5, DType::kBF16, device_);
  ASSERT_TRUE(f.ok());
  EXPECT_THAT(*f->to_float_vector(), ElementsAre(-1.5, -1.5, -1.5, -1.5));
  auto r = arange(1, 2, 0.25, DType::kF32, device_);
  ASSERT_TRUE(r.ok());
  EXPECT_THAT(*r->to_float_vector(), ElementsAre(1, 1.25, 1.5, 1.75));
  auto down = arange(5, 0, -2, DType::kI64, device_);
  ASSERT_TRUE(down.ok());
  EXPECT_THAT(*down->to_int_vector(), ElementsAre(5, 3, 1));
  EXPECT_THAT(arange(0, 1, 0, DType::kF32, device_).status().message(),
              HasSubstr("non-zero step"));
  EXPECT_THAT(
      from_floats({1, 2, 3}, {2, 2}, DType::kF32, device_).status().message(),
      HasSubstr("got 3 values for shape [2, 2]"));
}

TEST_F(TensorOpsTest, RandomIsPhiloxAndReproducible) {
  // Random123's known answer for Philox4x32-10, counter 0 and key 0.
  EXPECT_THAT(sdk::Philox4x32(0, 0),
              ElementsAre(0x6627e8d5u, 0xe169c58du, 0xbc57ac4cu, 0x9b00dbd8u));
  Generator g1(42), g2(42), g3(43);
  auto a = rand({1000}, DType::kF32, device_, 0, 1, &g1);
  auto b = rand({1000}, DType::kF32, device_, 0, 1, &g2);
  auto c = rand({1000}, DType::kF32, device_, 0, 1, &g3);
  ASSERT_TRUE(a.ok() && b.ok() && c.ok());
  EXPECT_EQ(*a->to_float_vector(), *b->to_float_vector());
  EXPECT_NE(*a->to_float_vector(), *c->to_float_vector());
  // The next draw continues the stream instead of repeating it.
  auto a2 = rand({1000}, DType::kF32, device_, 0, 1, &g1);
  EXPECT_NE(*a->to_float_vector(), *a2->to_float_vector());
  EXPECT_EQ(g1.offset(), 500u);  // 2 draws x 250 Philox blocks.
  // Held in a named StatusOr: a range-for over *temporary() would read a
  // destroyed temporary (AddressSanitizer caught it).
  const absl::StatusOr<std::vector<float>> values = a->to_float_vector();
  ASSERT_TRUE(values.ok());
  for (float v : *values) {
    ASSERT_GE(v, 0.0f);
    ASSERT_LT(v, 1.0f);
  }
}

TEST_F(TensorOpsTest, NormalSamplesHaveTheRightMoments) {
  Generator g(7);
  constexpr int kN = 100000;
  auto x = randn({kN}, DType::kF32, device_, 3.0, 2.0, &g);
  ASSERT_TRUE(x.ok());
  const std::vector<float> v = *x->to_float_vector();
  double sum = 0, sq = 0;
  for (float s : v) sum += s;
  const double mean = sum / kN;
  for (float s : v) sq += (s - mean) * (s - mean);
  const double var = sq / (kN - 1);
  // Standard error of the mean is 2/sqrt(1e5) = 0.0063; of the variance
  // about 4*sqrt(2/1e5) = 0.018. Bounds are about 5 standard errors.
  EXPECT_NEAR(mean, 3.0, 0.032);
  EXPECT_NEAR(var, 4.0, 0.09);
}

TEST_F(TensorOpsTest, AddBroadcastsAndMatchesHostArithmetic) {
  Tensor a = Floats({1, 2, 3}, {3, 1});
  Tensor b = Floats({10, 20, 30, 40}, {4});
  auto c = add(a, b);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_THAT(c->shape(), ElementsAre(3, 4));
  std::vector<float> expected;
  for (float x : {1.f, 2.f, 3.f})
    for (float y : {10.f, 20.f, 30.f, 40.f}) expected.push_back(x + y);
  EXPECT_EQ(*c->to_float_vector(), expected);
  auto bad = add(Floats({1, 2}, {2}), Floats({1, 2, 3}, {3}));
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr("cannot be broadcast"));
}

TEST_F(TensorOpsTest, ArithmeticOnStridedViews) {
  auto x = arange(0, 12, 1, DType::kF32, device_);
  ASSERT_TRUE(x.ok());
  auto m = x->view({3, 4});
  auto t = m->transpose(0, 1);  // [4, 3], strides [1, 4]
  auto y = mul(*t, *t);
  ASSERT_TRUE(y.ok());
  std::vector<float> expected;
  for (int j = 0; j < 4; ++j)
    for (int i = 0; i < 3; ++i) expected.push_back((i * 4 + j) * (i * 4 + j));
  EXPECT_EQ(*y->to_float_vector(), expected);
}

TEST_F(TensorOpsTest, HalfPrecisionArithmeticRoundsOnce) {
  // In f16, 1 + 2^-11 is a tie that rounds to 1; 1 + 3*2^-11 rounds up.
  Tensor one = Floats({1, 1}, {2}, DType::kF16);
  Tensor eps = Floats({std::ldexp(1.0f, -11), 3 * std::ldexp(1.0f, -11)}, {2},
                      DType::kF16);
  auto s = add(one, eps);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->dtype(), DType::kF16);
  EXPECT_THAT(Bits16(*s), ElementsAre(0x3c00, 0x3c02));
}

TEST_F(TensorOpsTest, TypePromotion) {
  Tensor h = Floats({1.5f}, {1}, DType::kF16);
  Tensor bf = Floats({2.25f}, {1}, DType::kBF16);
  auto i32 = from_ints({3}, {1}, DType::kI32, device_);
  auto i64 = from_ints({4}, {1}, DType::kI64, device_);
  ASSERT_TRUE(i32.ok() && i64.ok());
  auto hb = add(h, bf);
  EXPECT_EQ(hb->dtype(), DType::kF32);
  EXPECT_EQ(*hb->item(), 3.75);
  auto hi = mul(h, *i64);
  EXPECT_EQ(hi->dtype(), DType::kF16);
  EXPECT_EQ(*hi->item(), 6.0);
  auto ii = sub(*i32, *i64);
  EXPECT_EQ(ii->dtype(), DType::kI64);
  EXPECT_EQ(*ii->item(), -1.0);
}

TEST_F(TensorOpsTest, IntegerDivisionTruncatesAndRefusesZero) {
  auto a = from_ints({7, -7}, {2}, DType::kI64, device_);
  auto b = from_ints({2, 2}, {2}, DType::kI64, device_);
  auto z = from_ints({2, 0}, {2}, DType::kI64, device_);
  auto q = div(*a, *b);
  ASSERT_TRUE(q.ok());
  EXPECT_THAT(*q->to_int_vector(), ElementsAre(3, -3));
  auto bad = div(*a, *z);
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr("integer division by zero"));
}

TEST_F(TensorOpsTest, NanAndInfPropagate) {
  Tensor x = Floats({NAN, INFINITY, -INFINITY, 1}, {4});
  Tensor y = Floats({1, 1, INFINITY, 0}, {4});
  auto s = add(x, y);
  auto q = div(x, y);
  ASSERT_TRUE(s.ok() && q.ok());
  const std::vector<float> sv = *s->to_float_vector();
  EXPECT_TRUE(std::isnan(sv[0]));
  EXPECT_EQ(sv[1], INFINITY);
  EXPECT_TRUE(std::isnan(sv[2]));                    // -inf + inf
  EXPECT_EQ(q->to_float_vector()->at(3), INFINITY);  // 1 / 0
}

TEST_F(TensorOpsTest, RefusesBoolArithmetic) {
  auto b = full({2}, 1, DType::kBool, device_);
  ASSERT_TRUE(b.ok());
  EXPECT_THAT(add(*b, *b).status().message(),
              HasSubstr("bool tensors are not supported"));
  EXPECT_THAT(neg(*b).status().message(), HasSubstr("bool"));
}

TEST_F(TensorOpsTest, MovesBetweenDevicesAndRefusesMixedOperands) {
  auto other_backend = Registry::Global().Load(
      testing::RunfilePath("tests/fixtures/libmixrt_fixture_ok.so"));
  ASSERT_TRUE(other_backend.ok()) << other_backend.status();
  const Device other(*other_backend, 0);
  Tensor x = Floats({1, 2, 3, 4, 5, 6}, {2, 3});
  auto t = x.transpose(0, 1);
  auto moved = t->to(other);
  ASSERT_TRUE(moved.ok()) << moved.status();
  EXPECT_EQ(moved->device().ToString(), "fixture_ok:0");
  auto back = moved->to(device_);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_THAT(*back->to_float_vector(), ElementsAre(1, 4, 2, 5, 3, 6));
  auto mixed = add(x, *moved->view({2, 3}));
  ASSERT_FALSE(mixed.ok());
  EXPECT_THAT(mixed.status().message(),
              HasSubstr("different devices (reference:0 and fixture_ok:0)"));
  // The fixture claims elementwise f32 but runs no kernels: with fallback
  // off its refusal comes back as a Status naming the op...
  ASSERT_TRUE(SetFallbackPolicy("off").ok());
  auto failed = add(*moved, *moved);
  ASSERT_FALSE(failed.ok());
  EXPECT_THAT(failed.status().message(),
              HasSubstr("backend 'fixture_ok' kernel_launch(binary)"));
  // ...and by default the op runs on a host backend that has it.
  ASSERT_TRUE(SetFallbackPolicy(std::nullopt).ok());
  auto doubled = add(*moved, *moved);
  ASSERT_TRUE(doubled.ok()) << doubled.status();
  EXPECT_EQ(doubled->device().ToString(), "fixture_ok:0");
  EXPECT_THAT(*doubled->to_float_vector(), ElementsAre(2, 8, 4, 10, 6, 12));
}

}  // namespace
}  // namespace mixrt
