// Direct convolution and pooling functors on the host against the reference:
// strides, padding, dilation, groups, bias and activations; max pooling's
// first-maximum and NaN rules; every gradient.
#include "backends/gpu/conv_pool_functors.h"

#include <cmath>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/gpu/host_launch.h"
#include "tests/gpu/host_tensor.h"

namespace mixrt::testing {
namespace {

using gpu::DeviceTensor;

struct ConvCase {
  int64_t n, c, h, w, o, kh, kw;
  int32_t stride, padding, dilation, groups;
};

const ConvCase kConvCases[] = {
    {2, 3, 7, 6, 4, 3, 3, 1, 1, 1, 1},  // "same" 3x3
    {1, 4, 9, 8, 6, 3, 2, 2, 0, 1, 2},  // strided, grouped, 3x2
    {2, 2, 8, 8, 2, 3, 3, 1, 2, 2, 2},  // dilated, depthwise
    {1, 5, 4, 4, 3, 1, 1, 1, 0, 1, 1},  // 1x1
};

int64_t OutSize(int64_t in, int64_t k, int32_t s, int32_t p, int32_t d) {
  return (in + 2 * p - d * (k - 1) - 1) / s + 1;
}

TEST(ConvFunctors, ForwardAndBothGradientsMatchReference) {
  for (MixrtDtype dtype :
       {MIXRT_DTYPE_F32, MIXRT_DTYPE_F16, MIXRT_DTYPE_BF16}) {
    for (const ConvCase& k : kConvCases) {
      const int64_t ho = OutSize(k.h, k.kh, k.stride, k.padding, k.dilation);
      const int64_t wo = OutSize(k.w, k.kw, k.stride, k.padding, k.dilation);
      const HostTensor x =
          HostTensor(dtype, {k.n, k.c, k.h, k.w}).FillRandom(1);
      const HostTensor wt =
          HostTensor(dtype, {k.o, k.c / k.groups, k.kh, k.kw}).FillRandom(2);
      const HostTensor bias = HostTensor(dtype, {k.o}).FillRandom(3);
      gpu::ConvGeometry g;
      g.n = k.n, g.c = k.c, g.h = k.h, g.w = k.w, g.o = k.o, g.kh = k.kh,
      g.kw = k.kw, g.ho = ho, g.wo = wo, g.groups = k.groups;
      g.cg = k.c / k.groups, g.og = k.o / k.groups;
      for (int d = 0; d < 2; ++d) {
        g.stride[d] = k.stride;
        g.padding[d] = k.padding;
        g.dilation[d] = k.dilation;
      }
      const std::string label = "conv dtype " + std::to_string(dtype) +
                                " case c" + std::to_string(k.c) + " g" +
                                std::to_string(k.groups);
      // Sums of up to ~30 products of N(0,1) values: scale ~sqrt(30).
      const double tol = StoreTolerance(dtype) + 1e-5;
      for (uint32_t act = MIXRT_ACTIVATION_NONE;
           act <= MIXRT_ACTIVATION_GELU_TANH; ++act) {
        const MixrtConvAttrs attrs{sizeof(MixrtConvAttrs),
                                   nullptr,
                                   {k.stride, k.stride},
                                   {k.padding, k.padding},
                                   {k.dilation, k.dilation},
                                   k.groups,
                                   act};
        HostTensor want(dtype, {k.n, k.o, ho, wo}),
            got(dtype, {k.n, k.o, ho, wo});
        RunReference(MIXRT_OP_CONV2D, {&x, &wt, &bias}, {&want}, &attrs);
        RunElementwiseOnHost(
            gpu::ConvForwardFunctor{got.device(), x.device(), wt.device(),
                                    bias.device(), true, act, g},
            got.numel());
        ExpectNear(got.Values(), want.Values(), tol, 6.0,
                   label + " act " + std::to_string(act));
      }
      const MixrtConvAttrs attrs{
          sizeof(MixrtConvAttrs),   nullptr,
          {k.stride, k.stride},     {k.padding, k.padding},
          {k.dilation, k.dilation}, k.groups,
          MIXRT_ACTIVATION_NONE};
      const HostTensor gy = HostTensor(dtype, {k.n, k.o, ho, wo}).FillRandom(4);
      HostTensor gx_want(dtype, {k.n, k.c, k.h, k.w}),
          gx_got(dtype, {k.n, k.c, k.h, k.w});
      RunReference(MIXRT_OP_CONV2D_BACKWARD_DATA, {&gy, &wt}, {&gx_want},
                   &attrs);
      RunElementwiseOnHost(
          gpu::ConvBackwardDataFunctor{gx_got.device(), gy.device(),
                                       wt.device(), g},
          gx_got.numel());
      ExpectNear(gx_got.Values(), gx_want.Values(), tol, 6.0,
                 label + " grad_x");
      HostTensor gw_want(MIXRT_DTYPE_F32, {k.o, k.c / k.groups, k.kh, k.kw}),
          gb_want(MIXRT_DTYPE_F32, {k.o});
      RunReference(MIXRT_OP_CONV2D_BACKWARD_WEIGHTS, {&gy, &x},
                   {&gw_want, &gb_want}, &attrs);
      for (int lanes : {1, 3, 32}) {
        HostTensor gw_got(MIXRT_DTYPE_F32, {k.o, k.c / k.groups, k.kh, k.kw}),
            gb_got(MIXRT_DTYPE_F32, {k.o});
        gpu::ConvBackwardWeightsRows f{gw_got.device(),
                                       gb_got.device(),
                                       gy.device(),
                                       x.device(),
                                       g,
                                       false};
        RunRowsOnHost(f, gw_got.numel(), lanes);
        f.bias_only = true;
        RunRowsOnHost(f, k.o, lanes);
        // Sums of up to 2 * 9 * 8 products: scale ~12.
        ExpectNear(gw_got.Values(), gw_want.Values(), 1e-5, 12.0,
                   label + " grad_w lanes " + std::to_string(lanes));
        ExpectNear(gb_got.Values(), gb_want.Values(), 1e-5, 12.0,
                   label + " grad_b lanes " + std::to_string(lanes));
      }
    }
  }
}

TEST(PoolFunctors, MaxAndAveragePoolingWithGradients) {
  for (MixrtDtype dtype : {MIXRT_DTYPE_F32, MIXRT_DTYPE_BF16}) {
    for (uint32_t kind : {MIXRT_POOL_MAX, MIXRT_POOL_AVG}) {
      for (int32_t stride : {1, 2}) {
        HostTensor x(dtype, {2, 3, 7, 6});
        // Small integers: ties, so "the first maximum wins" is exercised.
        x.FillInts(5, -3, 3);
        x.Set(10, NAN);
        const MixrtPoolAttrs attrs{
            sizeof(MixrtPoolAttrs), nullptr, kind, {3, 2},
            {stride, stride},       {1, 1}};
        const int64_t ho = (7 + 2 - 3) / stride + 1;
        const int64_t wo = (6 + 2 - 2) / stride + 1;
        gpu::PoolGeometry g;
        g.n = 2, g.c = 3, g.h = 7, g.w = 6, g.ho = ho, g.wo = wo;
        g.kernel[0] = 3, g.kernel[1] = 2;
        g.stride[0] = g.stride[1] = stride;
        g.padding[0] = g.padding[1] = 1;
        g.max = kind == MIXRT_POOL_MAX;
        const std::string label = "pool kind " + std::to_string(kind) +
                                  " stride " + std::to_string(stride) +
                                  " dtype " + std::to_string(dtype);
        HostTensor want(dtype, {2, 3, ho, wo}), got(dtype, {2, 3, ho, wo});
        RunReference(MIXRT_OP_POOL2D, {&x}, {&want}, &attrs);
        RunElementwiseOnHost(
            gpu::PoolForwardFunctor{got.device(), x.device(), g}, got.numel());
        ExpectNear(got.Values(), want.Values(), StoreTolerance(dtype), 1e-6,
                   label);
        const HostTensor gy = HostTensor(dtype, {2, 3, ho, wo}).FillRandom(6);
        HostTensor gx_want(dtype, {2, 3, 7, 6}), gx_got(dtype, {2, 3, 7, 6});
        RunReference(MIXRT_OP_POOL2D_BACKWARD, {&gy, &x}, {&gx_want}, &attrs);
        RunElementwiseOnHost(
            gpu::PoolBackwardFunctor{gx_got.device(), gy.device(), x.device(),
                                     g},
            gx_got.numel());
        ExpectNear(gx_got.Values(), gx_want.Values(), 2 * StoreTolerance(dtype),
                   1.0, label + " backward");
      }
    }
  }
}

}  // namespace
}  // namespace mixrt::testing
