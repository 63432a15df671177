// The row functors (softmax, layer norm, cross entropy, reductions), run on
// the host with 1, 3 and 32 lanes per row, against the reference plugin.
#include "backends/gpu/row_functors.h"

#include <cmath>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/gpu/host_launch.h"
#include "tests/gpu/host_tensor.h"

namespace mixrt::testing {
namespace {

using gpu::DeviceTensor;

const MixrtDtype kFloatDtypes[] = {MIXRT_DTYPE_F32, MIXRT_DTYPE_F16,
                                   MIXRT_DTYPE_BF16};
const int kLanes[] = {1, 3, 32};

std::string Label(const char* what, MixrtDtype dtype, int lanes) {
  return std::string(what) + " dtype " + std::to_string(dtype) + " lanes " +
         std::to_string(lanes);
}

TEST(RowFunctors, SoftmaxAndLogSoftmaxAlongEveryAxis) {
  for (MixrtDtype dtype : kFloatDtypes) {
    HostTensor x(dtype, {3, 5, 40});
    x.FillRandom(1, 3.0);
    for (int axis = 0; axis < 3; ++axis) {
      gpu::AxisRows rows;
      rows.extent = x.shape()[axis];
      for (int d = axis + 1; d < 3; ++d) rows.inner *= x.shape()[d];
      const MixrtAxisAttrs attrs{sizeof(MixrtAxisAttrs), nullptr, axis};
      for (bool log : {false, true}) {
        HostTensor want(dtype, x.shape());
        RunReference(log ? MIXRT_OP_LOG_SOFTMAX : MIXRT_OP_SOFTMAX, {&x},
                     {&want}, &attrs);
        HostTensor g(dtype, x.shape());
        g.FillRandom(2);
        HostTensor want_grad(dtype, x.shape());
        RunReference(
            log ? MIXRT_OP_LOG_SOFTMAX_BACKWARD : MIXRT_OP_SOFTMAX_BACKWARD,
            {&g, &want}, {&want_grad}, &attrs);
        for (int lanes : kLanes) {
          HostTensor got(dtype, x.shape()), got_grad(dtype, x.shape());
          RunRowsOnHost(gpu::SoftmaxRows{got.device(), x.device(), rows, log},
                        x.numel() / rows.extent, lanes);
          // log_softmax is x - max - log(sum): terms up to ~10 in size.
          ExpectNear(got.Values(), want.Values(), StoreTolerance(dtype),
                     log ? 10.0 : 1e-6,
                     Label(log ? "log_softmax" : "softmax", dtype, lanes));
          RunRowsOnHost(gpu::SoftmaxBackwardRows{got_grad.device(), g.device(),
                                                 want.device(), rows, log},
                        x.numel() / rows.extent, lanes);
          // The gradient subtracts a row sum: scale the error by its size.
          ExpectNear(got_grad.Values(), want_grad.Values(),
                     2 * StoreTolerance(dtype), 1.0,
                     Label("softmax backward", dtype, lanes));
        }
      }
    }
  }
}

TEST(RowFunctors, SoftmaxKeepsNanAndInfinityBehaviour) {
  HostTensor x(MIXRT_DTYPE_F32, {3, 4});
  x.Fill({1, NAN, 2, 3, 1, 2, INFINITY, 0, -INFINITY, -INFINITY, 0, 1});
  const MixrtAxisAttrs attrs{sizeof(MixrtAxisAttrs), nullptr, 1};
  HostTensor want(MIXRT_DTYPE_F32, {3, 4}), got(MIXRT_DTYPE_F32, {3, 4});
  RunReference(MIXRT_OP_SOFTMAX, {&x}, {&want}, &attrs);
  gpu::AxisRows rows;
  rows.extent = 4;
  RunRowsOnHost(gpu::SoftmaxRows{got.device(), x.device(), rows, false}, 3, 3);
  ExpectNear(got.Values(), want.Values(), 1e-6, 0, "softmax specials");
}

TEST(RowFunctors, LayerNormForwardAndBackward) {
  for (MixrtDtype dtype : kFloatDtypes) {
    for (bool affine : {false, true}) {
      HostTensor x(dtype, {6, 70}), w(dtype, {70}), b(dtype, {70});
      x.FillRandom(3, 2.0);
      for (int64_t i = 0; i < 70; ++i)
        x.Set(i, x.Get(i) + 50.0);  // Offset row.
      w.FillRandom(4);
      b.FillRandom(5);
      const MixrtNormAttrs attrs{sizeof(MixrtNormAttrs), nullptr, 1e-5};
      HostTensor y(dtype, {6, 70}), mean(MIXRT_DTYPE_F32, {6}),
          rstd(MIXRT_DTYPE_F32, {6});
      std::vector<const HostTensor*> ins = {&x};
      if (affine) ins = {&x, &w, &b};
      RunReference(MIXRT_OP_LAYER_NORM, ins, {&y, &mean, &rstd}, &attrs);
      HostTensor gy(dtype, {6, 70});
      gy.FillRandom(6);
      HostTensor gx(dtype, {6, 70}), gw(MIXRT_DTYPE_F32, {70}),
          gb(MIXRT_DTYPE_F32, {70});
      std::vector<const HostTensor*> bins = {&gy, &x, &mean, &rstd};
      std::vector<const HostTensor*> bouts = {&gx};
      if (affine) {
        bins.push_back(&w);
        bouts = {&gx, &gw, &gb};
      }
      RunReference(MIXRT_OP_LAYER_NORM_BACKWARD, bins, bouts, &attrs);
      for (int lanes : kLanes) {
        HostTensor y2(dtype, {6, 70}), mean2(MIXRT_DTYPE_F32, {6}),
            rstd2(MIXRT_DTYPE_F32, {6});
        RunRowsOnHost(
            gpu::LayerNormRows{y2.device(), mean2.device(), rstd2.device(),
                               x.device(), affine ? w.device() : DeviceTensor(),
                               affine ? b.device() : DeviceTensor(), 70, 1e-5f,
                               affine},
            6, lanes);
        // Welford in f32 on rows offset by 50: ~1e-6 relative on the mean.
        ExpectNear(mean2.Values(), mean.Values(), 1e-5, 1e-3,
                   Label("layer_norm mean", dtype, lanes));
        ExpectNear(rstd2.Values(), rstd.Values(), 1e-4, 0,
                   Label("layer_norm rstd", dtype, lanes));
        ExpectNear(y2.Values(), y.Values(), 2 * StoreTolerance(dtype), 1.0,
                   Label("layer_norm y", dtype, lanes));
        HostTensor gx2(dtype, {6, 70}), gw2(MIXRT_DTYPE_F32, {70}),
            gb2(MIXRT_DTYPE_F32, {70});
        RunRowsOnHost(
            gpu::LayerNormBackwardRows{gx2.device(), gy.device(), x.device(),
                                       mean.device(), rstd.device(),
                                       affine ? w.device() : DeviceTensor(), 70,
                                       affine},
            6, lanes);
        ExpectNear(gx2.Values(), gx.Values(), 2 * StoreTolerance(dtype), 1.0,
                   Label("layer_norm grad_x", dtype, lanes));
        if (!affine) continue;
        RunRowsOnHost(
            gpu::LayerNormParamGradColumns{gw2.device(), gb2.device(),
                                           gy.device(), x.device(),
                                           mean.device(), rstd.device(), 6, 70},
            70, lanes);
        ExpectNear(gw2.Values(), gw.Values(), 1e-4, 1.0,
                   Label("layer_norm grad_weight", dtype, lanes));
        ExpectNear(gb2.Values(), gb.Values(), 1e-4, 1.0,
                   Label("layer_norm grad_bias", dtype, lanes));
      }
    }
  }
}

TEST(RowFunctors, CrossEntropyWithSmoothingIgnoreIndexAndLogProbs) {
  for (MixrtDtype dtype : kFloatDtypes) {
    for (uint32_t log_probs : {0u, 1u}) {
      HostTensor logits(dtype, {9, 37});
      logits.FillRandom(7, 3.0);
      HostTensor target(MIXRT_DTYPE_I64, {9});
      target.FillInts(8, 0, 36);
      target.Set(4, -100);  // ignore_index
      const MixrtCrossEntropyAttrs attrs{sizeof(MixrtCrossEntropyAttrs),
                                         nullptr, -100, 0.1, log_probs};
      HostTensor loss(MIXRT_DTYPE_F32, {9});
      RunReference(MIXRT_OP_CROSS_ENTROPY, {&logits, &target}, {&loss}, &attrs);
      HostTensor gloss(MIXRT_DTYPE_F32, {9});
      gloss.FillRandom(9);
      HostTensor glogits(dtype, {9, 37});
      RunReference(MIXRT_OP_CROSS_ENTROPY_BACKWARD, {&gloss, &logits, &target},
                   {&glogits}, &attrs);
      for (int lanes : kLanes) {
        for (bool backward : {false, true}) {
          HostTensor got = backward ? HostTensor(dtype, {9, 37})
                                    : HostTensor(MIXRT_DTYPE_F32, {9});
          int32_t bad = 0;
          RunRowsOnHost(
              gpu::CrossEntropyRows{
                  got.device(), logits.device(), target.device(),
                  backward ? gloss.device() : DeviceTensor(), 37, -100, 0.1f,
                  log_probs != 0, backward, &bad},
              9, lanes);
          EXPECT_EQ(bad, 0);
          ExpectNear(
              got.Values(), (backward ? glogits : loss).Values(),
              backward ? 2 * StoreTolerance(dtype) : 1e-5, 1e-3,
              Label(backward ? "cross_entropy backward" : "cross_entropy",
                    dtype, lanes));
        }
      }
    }
  }
}

TEST(RowFunctors, CrossEntropyFlagsTargetsOutOfRange) {
  HostTensor logits(MIXRT_DTYPE_F32, {2, 5}), target(MIXRT_DTYPE_I64, {2});
  target.Fill({1, 5});
  HostTensor loss(MIXRT_DTYPE_F32, {2});
  int32_t bad = 0;
  RunRowsOnHost(
      gpu::CrossEntropyRows{loss.device(), logits.device(), target.device(),
                            DeviceTensor(), 5, -100, 0.0f, false, false, &bad},
      2, 3);
  EXPECT_EQ(bad, 1);
}

TEST(RowFunctors, ReduceEveryKindOverAxisSets) {
  for (MixrtDtype dtype : kFloatDtypes) {
    HostTensor x(dtype, {4, 6, 50});
    x.FillRandom(10, 4.0);
    for (uint32_t mask : {1u, 2u, 4u, 5u, 7u}) {
      std::vector<int64_t> out_shape = x.shape();
      for (int d = 0; d < 3; ++d) {
        if (mask & (1u << d)) out_shape[d] = 1;
      }
      for (uint32_t kind = 0; kind < MIXRT_REDUCE_COUNT; ++kind) {
        const MixrtReduceAttrs attrs{sizeof(MixrtReduceAttrs), nullptr, kind,
                                     mask, 1.0};
        HostTensor want(MIXRT_DTYPE_F32, out_shape);
        RunReference(MIXRT_OP_REDUCE, {&x}, {&want}, &attrs);
        int64_t reduced = 1;
        for (int d = 0; d < 3; ++d) {
          if (mask & (1u << d)) reduced *= x.shape()[d];
        }
        for (int lanes : kLanes) {
          HostTensor got(MIXRT_DTYPE_F32, out_shape);
          RunRowsOnHost(gpu::ReduceRows{got.device(), x.device(),
                                        static_cast<MixrtReduceKind>(kind),
                                        mask, 1.0f, reduced},
                        got.numel(), lanes);
          // Sums of up to 1200 N(0, 16) terms in f32: relative to the
          // magnitude of the terms (scale 4 * sqrt(n)), 1e-5 is ample.
          ExpectNear(got.Values(), want.Values(), 1e-5, 200.0,
                     Label("reduce", dtype, lanes) + " kind " +
                         std::to_string(kind) + " mask " +
                         std::to_string(mask));
        }
      }
    }
  }
}

TEST(RowFunctors, SplitReductionMatchesReference) {
  // A full reduction and a reduction to 3 values, each output shared by
  // several blocks whose partials a second pass folds.
  HostTensor x(MIXRT_DTYPE_BF16, {3, 1000});
  x.FillRandom(11, 3.0);
  for (uint32_t mask : {2u, 3u}) {
    const std::vector<int64_t> out_shape =
        mask == 3u ? std::vector<int64_t>{1, 1} : std::vector<int64_t>{3, 1};
    const int64_t outputs = mask == 3u ? 1 : 3;
    const int64_t reduced = 3000 / outputs;
    for (uint32_t kind = 0; kind < MIXRT_REDUCE_COUNT; ++kind) {
      const MixrtReduceAttrs attrs{sizeof(MixrtReduceAttrs), nullptr, kind,
                                   mask, 1.0};
      HostTensor want(MIXRT_DTYPE_F32, out_shape);
      RunReference(MIXRT_OP_REDUCE, {&x}, {&want}, &attrs);
      for (int64_t split : {2, 7}) {
        HostTensor got(MIXRT_DTYPE_F32, out_shape);
        std::vector<gpu::RowAcc> partials(outputs * split);
        gpu::ReduceRows f{
            got.device(), x.device(),     static_cast<MixrtReduceKind>(kind),
            mask,         1.0f,           reduced,
            split,        partials.data()};
        RunRowsOnHost(f, outputs * split, 32);
        RunElementwiseOnHost(gpu::ReduceCombineFunctor{f}, outputs);
        ExpectNear(got.Values(), want.Values(), 1e-5, 200.0,
                   "split " + std::to_string(split) + " kind " +
                       std::to_string(kind) + " mask " + std::to_string(mask));
      }
    }
  }
}

TEST(RowFunctors, ReducePropagatesNan) {
  HostTensor x(MIXRT_DTYPE_F32, {2, 3});
  x.Fill({1, NAN, 2, 3, 4, 5});
  for (uint32_t kind : {MIXRT_REDUCE_MAX, MIXRT_REDUCE_MIN, MIXRT_REDUCE_SUM}) {
    HostTensor got(MIXRT_DTYPE_F32, {2, 1});
    RunRowsOnHost(
        gpu::ReduceRows{got.device(), x.device(),
                        static_cast<MixrtReduceKind>(kind), 2u, 1.0f, 3},
        2, 2);
    EXPECT_TRUE(std::isnan(got.Get(0))) << "kind " << kind;
    EXPECT_FALSE(std::isnan(got.Get(1))) << "kind " << kind;
  }
}

}  // namespace
}  // namespace mixrt::testing
