// The creation and pointwise functors of the GPU kernels, run on the host,
// against the reference plugin (which computes in double).
#include "backends/gpu/elementwise_functors.h"

#include <cmath>
#include <vector>

#include "gtest/gtest.h"
#include "tests/gpu/host_launch.h"
#include "tests/gpu/host_tensor.h"

namespace mixrt::testing {
namespace {

using gpu::DeviceTensor;

const MixrtDtype kFloatDtypes[] = {MIXRT_DTYPE_F32, MIXRT_DTYPE_F16,
                                   MIXRT_DTYPE_BF16};

MixrtPointwiseAttrs Pointwise(uint32_t kind, double alpha = 0,
                              double beta = 0) {
  return {sizeof(MixrtPointwiseAttrs), nullptr, kind, alpha, beta};
}

// Inputs where every unary op is defined and away from kinks, plus special
// values: log, sqrt and friends of negatives give NaN in both.
HostTensor Operand(MixrtDtype dtype, uint64_t seed) {
  HostTensor t(dtype, {4, 33});
  t.FillRandom(seed, 2.0);
  t.Set(0, NAN);
  t.Set(1, INFINITY);
  t.Set(2, -INFINITY);
  t.Set(3, 0.0);
  return t;
}

TEST(ElementwiseFunctors, BinaryMatchesReferenceForEveryKindAndDtype) {
  for (MixrtDtype dtype : kFloatDtypes) {
    const HostTensor x = Operand(dtype, 1);
    HostTensor y = Operand(dtype, 2);
    // Broadcast y's first row along dim 0 with stride 0, as the host does.
    const HostTensor y_broadcast = y.Strided({4, 33}, {0, 1});
    for (uint32_t kind = 0; kind < MIXRT_BINARY_COUNT; ++kind) {
      HostTensor want(dtype, {4, 33}), got(dtype, {4, 33});
      const MixrtPointwiseAttrs attrs = Pointwise(kind);
      RunReference(MIXRT_OP_BINARY, {&x, &y_broadcast}, {&want}, &attrs);
      const gpu::BinaryFunctor f{got.device(), x.device(), y_broadcast.device(),
                                 static_cast<MixrtBinaryKind>(kind), nullptr};
      RunElementwiseOnHost(f, got.numel());
      ExpectNear(got.Values(), want.Values(), StoreTolerance(dtype), 0,
                 "binary kind " + std::to_string(kind) + " dtype " +
                     std::to_string(dtype));
    }
  }
}

TEST(ElementwiseFunctors, UnaryAndItsGradientMatchReference) {
  for (MixrtDtype dtype : kFloatDtypes) {
    const HostTensor x = Operand(dtype, 3);
    const HostTensor g = HostTensor(dtype, {4, 33}).FillRandom(4);
    for (uint32_t kind = 0; kind < MIXRT_UNARY_COUNT; ++kind) {
      const MixrtPointwiseAttrs attrs = Pointwise(kind, 0.5, 1.5);
      for (bool backward : {false, true}) {
        HostTensor want(dtype, {4, 33}), got(dtype, {4, 33});
        if (backward) {
          RunReference(MIXRT_OP_UNARY_BACKWARD, {&g, &x}, {&want}, &attrs);
        } else {
          RunReference(MIXRT_OP_UNARY, {&x}, {&want}, &attrs);
        }
        const gpu::UnaryFunctor f{got.device(),
                                  x.device(),
                                  backward ? g.device() : DeviceTensor(),
                                  static_cast<MixrtUnaryKind>(kind),
                                  0.5f,
                                  1.5f,
                                  backward};
        RunElementwiseOnHost(f, got.numel());
        // f32 transcendental functions are within a few ulp of double.
        // Gradients such as 1 - tanh^2 cancel terms of size 1, so their
        // error is absolute at that scale.
        ExpectNear(got.Values(), want.Values(), 4 * StoreTolerance(dtype),
                   backward ? 1.0 : 1e-6,
                   std::string(backward ? "d" : "") + "unary kind " +
                       std::to_string(kind) + " dtype " +
                       std::to_string(dtype));
      }
    }
  }
}

TEST(ElementwiseFunctors, IntegerBinaryWrapsAndFlagsZeroDivisors) {
  for (MixrtDtype dtype : {MIXRT_DTYPE_I32, MIXRT_DTYPE_I64}) {
    const HostTensor x = HostTensor(dtype, {50}).FillInts(5, -1000, 1000);
    const HostTensor y = HostTensor(dtype, {50}).FillInts(6, 1, 9);
    for (uint32_t kind = 0; kind < MIXRT_BINARY_COUNT; ++kind) {
      HostTensor want(dtype, {50}), got(dtype, {50});
      const MixrtPointwiseAttrs attrs = Pointwise(kind);
      RunReference(MIXRT_OP_BINARY, {&x, &y}, {&want}, &attrs);
      int32_t bad = 0;
      const gpu::BinaryFunctor f{got.device(), x.device(), y.device(),
                                 static_cast<MixrtBinaryKind>(kind), &bad};
      RunElementwiseOnHost(f, got.numel());
      EXPECT_EQ(got.Values(), want.Values()) << "kind " << kind;
      EXPECT_EQ(bad, 0);
    }
    HostTensor zero_somewhere = y.Clone();
    zero_somewhere.Set(17, 0);
    HostTensor out(dtype, {50});
    int32_t bad = 0;
    RunElementwiseOnHost(
        gpu::BinaryFunctor{out.device(), x.device(), zero_somewhere.device(),
                           MIXRT_BINARY_DIV, &bad},
        50);
    EXPECT_EQ(bad, 1) << "division by zero must be reported";
  }
}

TEST(ElementwiseFunctors, IntegerNegAndAbsMatchReference) {
  HostTensor x(MIXRT_DTYPE_I64, {4});
  x.Fill({-5, 0, 7, static_cast<double>(INT64_MIN)});
  for (uint32_t kind : {MIXRT_UNARY_NEG, MIXRT_UNARY_ABS}) {
    HostTensor want(MIXRT_DTYPE_I64, {4}), got(MIXRT_DTYPE_I64, {4});
    const MixrtPointwiseAttrs attrs = Pointwise(kind);
    RunReference(MIXRT_OP_UNARY, {&x}, {&want}, &attrs);
    RunElementwiseOnHost(
        gpu::UnaryFunctor{got.device(), x.device(), DeviceTensor(),
                          static_cast<MixrtUnaryKind>(kind), 0, 0, false},
        4);
    EXPECT_EQ(got.Values(), want.Values());
  }
}

TEST(ElementwiseFunctors, CompareAndWhereMatchReference) {
  for (MixrtDtype dtype :
       {MIXRT_DTYPE_F32, MIXRT_DTYPE_BF16, MIXRT_DTYPE_I64}) {
    HostTensor x(dtype, {40}), y(dtype, {40});
    x.FillInts(7, -3, 3);
    y.FillInts(8, -3, 3);
    if (dtype != MIXRT_DTYPE_I64) x.Set(0, NAN);
    HostTensor mask(MIXRT_DTYPE_BOOL, {40});
    for (uint32_t kind = 0; kind < MIXRT_COMPARE_COUNT; ++kind) {
      HostTensor want(MIXRT_DTYPE_BOOL, {40});
      const MixrtPointwiseAttrs attrs = Pointwise(kind);
      RunReference(MIXRT_OP_COMPARE, {&x, &y}, {&want}, &attrs);
      RunElementwiseOnHost(
          gpu::CompareFunctor{mask.device(), x.device(), y.device(),
                              static_cast<MixrtCompareKind>(kind)},
          40);
      EXPECT_EQ(mask.Values(), want.Values()) << "kind " << kind;
    }
    HostTensor want(dtype, {40}), got(dtype, {40});
    RunReference(MIXRT_OP_WHERE, {&mask, &x, &y}, {&want}, nullptr);
    RunElementwiseOnHost(
        gpu::WhereFunctor{got.device(), mask.device(), x.device(), y.device()},
        40);
    ExpectNear(got.Values(), want.Values(), 0, 0, "where");
  }
}

TEST(ElementwiseFunctors, CopyConvertsEveryDtypePairFromStridedInput) {
  const MixrtDtype all[] = {MIXRT_DTYPE_F32, MIXRT_DTYPE_F16, MIXRT_DTYPE_BF16,
                            MIXRT_DTYPE_I32, MIXRT_DTYPE_I64, MIXRT_DTYPE_BOOL};
  for (MixrtDtype from : all) {
    HostTensor src(from, {6, 5});
    src.FillRandom(9, 100.0);
    if (from == MIXRT_DTYPE_F32) {
      src.Set(0, NAN);
      src.Set(1, 1e20);
      src.Set(2, -1e20);
      src.Set(3, 65520.0);  // Rounds to inf in f16.
    }
    const HostTensor transposed = src.Strided({5, 6}, {1, 5});
    for (MixrtDtype to : all) {
      HostTensor want(to, {5, 6}), got(to, {5, 6});
      RunReference(MIXRT_OP_COPY, {&transposed}, {&want}, nullptr);
      RunElementwiseOnHost(gpu::CopyFunctor{got.device(), transposed.device()},
                           got.numel());
      // Conversions are exact functions: bit-identical results.
      ExpectNear(got.Values(), want.Values(), 0, 0,
                 "copy " + std::to_string(from) + " -> " + std::to_string(to));
    }
  }
}

TEST(ElementwiseFunctors, FillArangeAndRandomAreBitIdenticalToReference) {
  for (MixrtDtype dtype :
       {MIXRT_DTYPE_F32, MIXRT_DTYPE_BF16, MIXRT_DTYPE_I64}) {
    HostTensor want(dtype, {3, 7}), got(dtype, {3, 7});
    const MixrtScalarAttrs fill{sizeof(MixrtScalarAttrs), nullptr, 2.75};
    RunReference(MIXRT_OP_FILL, {}, {&want}, &fill);
    RunElementwiseOnHost(gpu::FillFunctor{got.device(), 2.75}, 21);
    EXPECT_EQ(got.Values(), want.Values());
    const MixrtArangeAttrs arange{sizeof(MixrtArangeAttrs), nullptr, -3.5,
                                  0.25};
    RunReference(MIXRT_OP_ARANGE, {}, {&want}, &arange);
    RunElementwiseOnHost(gpu::ArangeFunctor{got.device(), -3.5, 0.25}, 21);
    EXPECT_EQ(got.Values(), want.Values());
  }
  for (MixrtOp op : {MIXRT_OP_RANDOM_UNIFORM, MIXRT_OP_RANDOM_NORMAL}) {
    HostTensor want(MIXRT_DTYPE_F32, {1001}), got(MIXRT_DTYPE_F32, {1001});
    const MixrtRandomAttrs attrs{
        sizeof(MixrtRandomAttrs), nullptr, 42, 7, -1.0, 2.0};
    RunReference(op, {}, {&want}, &attrs);
    RunElementwiseOnHost(
        gpu::RandomFunctor{got.device(), attrs, op == MIXRT_OP_RANDOM_NORMAL},
        got.numel());
    EXPECT_EQ(got.Values(), want.Values());
  }
}

TEST(ElementwiseFunctors, DropoutMatchesReferenceFromStridedInput) {
  for (MixrtDtype dtype : kFloatDtypes) {
    HostTensor x(dtype, {40, 33});
    x.FillRandom(5, 2.0);
    x.Set(7, INFINITY);  // inf * 0 is NaN where dropped, as in PyTorch.
    const HostTensor xt = x.Strided({33, 40}, {1, 33});  // The transpose.
    const MixrtDropoutAttrs attrs{sizeof(MixrtDropoutAttrs), nullptr, 0.3, 9,
                                  11};
    HostTensor want(dtype, {33, 40}), got(dtype, {33, 40});
    RunReference(MIXRT_OP_DROPOUT, {&xt}, {&want}, &attrs);
    RunElementwiseOnHost(gpu::DropoutFunctor{got.device(), xt.device(), attrs},
                         got.numel());
    const std::vector<double> g = got.Values(), w = want.Values();
    int dropped = 0;
    for (size_t i = 0; i < g.size(); ++i) {
      if (w[i] == 0 && x.Values()[(i % 40) * 33 + i / 40] != 0) ++dropped;
      EXPECT_EQ(g[i] == 0, w[i] == 0) << "element " << i;
    }
    // 1320 draws at p = 0.3: 396 expected, standard deviation ~17.
    EXPECT_NEAR(dropped, 396, 4 * 17);
    ExpectNear(g, w, StoreTolerance(dtype), 0,
               "dropout dtype " + std::to_string(dtype));
  }
}

}  // namespace
}  // namespace mixrt::testing
