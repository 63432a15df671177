// Batch norm functors (training and eval, forward and backward) on the host
// with 1, 3 and 32 lanes per channel, against the reference plugin.
#include "backends/gpu/batch_norm_functors.h"

#include <cmath>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/gpu/host_launch.h"
#include "tests/gpu/host_tensor.h"

namespace mixrt::testing {
namespace {

TEST(BatchNormFunctors, ForwardAndBackwardInBothModes) {
  for (MixrtDtype dtype :
       {MIXRT_DTYPE_F32, MIXRT_DTYPE_F16, MIXRT_DTYPE_BF16}) {
    for (uint32_t training : {1u, 0u}) {
      const std::vector<int64_t> shape = {4, 3, 5, 7};
      HostTensor x(dtype, shape);
      x.FillRandom(1, 2.0);
      const HostTensor w = HostTensor(MIXRT_DTYPE_F32, {3}).FillRandom(2);
      const HostTensor b = HostTensor(MIXRT_DTYPE_F32, {3}).FillRandom(3);
      HostTensor rm(MIXRT_DTYPE_F32, {3}), rv(MIXRT_DTYPE_F32, {3});
      rm.Fill({0.1, -0.2, 0.3});
      rv.Fill({1.5, 0.5, 2.0});
      const MixrtBatchNormAttrs attrs{sizeof(MixrtBatchNormAttrs), nullptr,
                                      training, 0.1, 1e-5};
      HostTensor y(dtype, shape), sm(MIXRT_DTYPE_F32, {3}),
          si(MIXRT_DTYPE_F32, {3});
      HostTensor rm_want = rm.Clone(), rv_want = rv.Clone();
      RunReference(MIXRT_OP_BATCH_NORM, {&x, &w, &b},
                   {&y, &sm, &si, &rm_want, &rv_want}, &attrs);
      const HostTensor gy = HostTensor(dtype, shape).FillRandom(4);
      HostTensor gx(dtype, shape), gw(MIXRT_DTYPE_F32, {3}),
          gb(MIXRT_DTYPE_F32, {3});
      RunReference(MIXRT_OP_BATCH_NORM_BACKWARD, {&gy, &x, &w, &sm, &si},
                   {&gx, &gw, &gb}, &attrs);
      gpu::ChannelElements e;
      e.channels = 3;
      e.spatial = 35;
      e.count = 140;
      for (int lanes : {1, 3, 32}) {
        const std::string label = "dtype " + std::to_string(dtype) +
                                  " training " + std::to_string(training) +
                                  " lanes " + std::to_string(lanes);
        HostTensor y2(dtype, shape), sm2(MIXRT_DTYPE_F32, {3}),
            si2(MIXRT_DTYPE_F32, {3});
        HostTensor rm2 = rm.Clone(), rv2 = rv.Clone();
        RunRowsOnHost(
            gpu::BatchNormChannels{y2.device(), sm2.device(), si2.device(),
                                   rm2.device(), rv2.device(), x.device(),
                                   w.device(), b.device(), e, 0.1f, 1e-5f,
                                   training != 0},
            3, lanes);
        // Statistics over 140 values of size ~2 in f32.
        ExpectNear(sm2.Values(), sm.Values(), 1e-5, 1.0, "mean " + label);
        ExpectNear(si2.Values(), si.Values(), 1e-5, 0, "invstd " + label);
        ExpectNear(rm2.Values(), rm_want.Values(), 1e-5, 1.0,
                   "running_mean " + label);
        ExpectNear(rv2.Values(), rv_want.Values(), 1e-5, 0,
                   "running_var " + label);
        ExpectNear(y2.Values(), y.Values(), 2 * StoreTolerance(dtype), 1.0,
                   "y " + label);
        HostTensor gx2(dtype, shape), gw2(MIXRT_DTYPE_F32, {3}),
            gb2(MIXRT_DTYPE_F32, {3});
        RunRowsOnHost(
            gpu::BatchNormBackwardChannels{gx2.device(), gw2.device(),
                                           gb2.device(), gy.device(),
                                           x.device(), w.device(), sm.device(),
                                           si.device(), e, training != 0},
            3, lanes);
        ExpectNear(gx2.Values(), gx.Values(), 2 * StoreTolerance(dtype), 1.0,
                   "grad_x " + label);
        // Sums of 140 terms of size ~1: absolute error at scale ~10.
        ExpectNear(gw2.Values(), gw.Values(), 1e-5, 10.0,
                   "grad_weight " + label);
        ExpectNear(gb2.Values(), gb.Values(), 1e-5, 10.0, "grad_bias " + label);
      }
    }
  }
}

}  // namespace
}  // namespace mixrt::testing
