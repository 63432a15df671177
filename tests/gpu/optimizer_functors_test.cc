// Grad-scaler and optimizer functors on the host against the reference
// plugin, including the multi-tensor chunking of the unscale kernel.
#include "backends/gpu/optimizer_functors.h"

#include <cmath>
#include <vector>

#include "backends/gpu/multi_tensor_norm_functors.h"
#include "backends/gpu/multi_tensor_plan.h"
#include "gtest/gtest.h"
#include "tests/gpu/host_launch.h"
#include "tests/gpu/host_tensor.h"

namespace mixrt::testing {
namespace {

HostTensor Scalar(MixrtDtype dtype, double v) {
  HostTensor t(dtype, {1});
  t.Set(0, v);
  return t;
}

float* F32(const HostTensor& t) { return static_cast<float*>(t.data()); }

TEST(OptimizerFunctors, UnscaleManyTensorsInChunksMatchesReference) {
  for (bool with_inf : {false, true}) {
    std::vector<HostTensor> want, got;
    const int64_t sizes[] = {1, 700, 3, 0, 1500, 64};
    const MixrtDtype dtypes[] = {MIXRT_DTYPE_F32,  MIXRT_DTYPE_F16,
                                 MIXRT_DTYPE_BF16, MIXRT_DTYPE_F32,
                                 MIXRT_DTYPE_F32,  MIXRT_DTYPE_F16};
    for (int t = 0; t < 6; ++t) {
      HostTensor g(dtypes[t], {sizes[t]});
      g.FillRandom(20 + t, 1000.0);
      if (with_inf && t == 4) g.Set(1499, INFINITY);
      want.push_back(g.Clone());
      got.push_back(g.Clone());
    }
    const HostTensor inv_scale = Scalar(MIXRT_DTYPE_F32, 1.0 / 1024);
    HostTensor found_want = Scalar(MIXRT_DTYPE_F32, 0);
    HostTensor found_got = Scalar(MIXRT_DTYPE_F32, 0);
    std::vector<const HostTensor*> outs = {&found_want};
    for (const HostTensor& t : want) outs.push_back(&t);
    const MixrtScalarAttrs none{sizeof(MixrtScalarAttrs), nullptr, 0};
    RunReference(MIXRT_OP_NON_FINITE_CHECK_AND_UNSCALE, {&inv_scale}, outs,
                 &none);
    std::vector<gpu::MultiTensorInput> inputs;
    for (const HostTensor& t : got) {
      inputs.push_back({t.data(), static_cast<uint32_t>(t.dtype()), t.numel()});
    }
    // Small chunks and the real limits: several launches and blocks.
    for (const gpu::MultiTensorLaunch& launch :
         gpu::PlanMultiTensorLaunches(inputs, /*chunk=*/100)) {
      RunUnscaleOnHost(
          gpu::UnscaleChunkFunctor{launch, F32(inv_scale), F32(found_got)}, 32);
    }
    EXPECT_EQ(found_got.Get(0), found_want.Get(0));
    EXPECT_EQ(found_got.Get(0), with_inf ? 1.0 : 0.0);
    for (int t = 0; t < 6; ++t) {
      ExpectNear(got[t].Values(), want[t].Values(), 0, 0,
                 "unscaled gradient " + std::to_string(t));
    }
  }
}

// A non-finite inv_scale is an overflow: found_inf set, nothing written.
TEST(OptimizerFunctors, UnscaleWithAnInfiniteInverseScaleSkips) {
  HostTensor g(MIXRT_DTYPE_F32, {300});
  g.FillRandom(7, 1.0);
  const HostTensor before = g.Clone();
  const HostTensor inv_scale = Scalar(MIXRT_DTYPE_F32, INFINITY);
  HostTensor found = Scalar(MIXRT_DTYPE_F32, 0);
  for (const gpu::MultiTensorLaunch& launch : gpu::PlanMultiTensorLaunches(
           {{g.data(), static_cast<uint32_t>(g.dtype()), g.numel()}}, 100)) {
    RunUnscaleOnHost(
        gpu::UnscaleChunkFunctor{launch, F32(inv_scale), F32(found)}, 32);
  }
  EXPECT_EQ(found.Get(0), 1.0);
  ExpectNear(g.Values(), before.Values(), 0, 0, "gradient");
}

// The two stages of multi_tensor_norm, in the kernels' pattern, against the
// reference plugin's double sum.
TEST(OptimizerFunctors, MultiTensorNormInChunksMatchesReference) {
  for (bool with_inf : {false, true}) {
    std::vector<HostTensor> tensors;
    const int64_t sizes[] = {1, 700, 3, 0, 1500, 64};
    const MixrtDtype dtypes[] = {MIXRT_DTYPE_F32,  MIXRT_DTYPE_F16,
                                 MIXRT_DTYPE_BF16, MIXRT_DTYPE_F32,
                                 MIXRT_DTYPE_F32,  MIXRT_DTYPE_F16};
    std::vector<const HostTensor*> ins;
    for (int t = 0; t < 6; ++t) {
      tensors.emplace_back(dtypes[t], std::vector<int64_t>{sizes[t]});
      tensors.back().FillRandom(40 + t, 10.0);
      if (with_inf && t == 4) tensors.back().Set(1499, INFINITY);
    }
    for (const HostTensor& t : tensors) ins.push_back(&t);
    HostTensor want = Scalar(MIXRT_DTYPE_F32, -1);
    RunReference(MIXRT_OP_MULTI_TENSOR_NORM, ins, {&want}, nullptr);
    std::vector<gpu::MultiTensorInput> inputs;
    for (const HostTensor& t : tensors) {
      inputs.push_back({t.data(), static_cast<uint32_t>(t.dtype()), t.numel()});
    }
    // Small chunks and the real limits: several launches and rows.
    const auto launches = gpu::PlanMultiTensorLaunches(inputs, /*chunk=*/100);
    int64_t chunks = 0;
    for (const auto& l : launches) chunks += l.num_blocks;
    std::vector<float> partials(chunks, NAN);
    int64_t first = 0;
    for (const gpu::MultiTensorLaunch& l : launches) {
      RunRowsOnHost(gpu::MultiTensorNormRows{l, partials.data(), first},
                    l.num_blocks, 32);
      first += l.num_blocks;
    }
    HostTensor got = Scalar(MIXRT_DTYPE_F32, -1);
    RunElementwiseOnHost(
        gpu::MultiTensorNormFinish{partials.data(), chunks, F32(got)}, 1);
    if (with_inf) {
      EXPECT_TRUE(std::isinf(got.Get(0)));
    } else {
      // f32 partials of at most 100 squares each (100 * 2^-24 relative),
      // then a double sum.
      ExpectNear({got.Get(0)}, {want.Get(0)}, 1e-5, 0, "norm");
    }
  }
  HostTensor none = Scalar(MIXRT_DTYPE_F32, -1);
  RunElementwiseOnHost(gpu::MultiTensorNormFinish{nullptr, 0, F32(none)}, 1);
  EXPECT_EQ(none.Get(0), 0.0);
}

TEST(OptimizerFunctors, UpdateScaleFollowsTorchAmpUpdateScale) {
  const MixrtUpdateScaleAttrs attrs{sizeof(MixrtUpdateScaleAttrs), nullptr, 2.0,
                                    0.5, 3};
  for (double found : {0.0, 1.0}) {
    for (int tracker : {0, 1, 2}) {
      const HostTensor found_inf = Scalar(MIXRT_DTYPE_F32, found);
      HostTensor scale_want = Scalar(MIXRT_DTYPE_F32, 65536),
                 tracker_want = Scalar(MIXRT_DTYPE_I32, tracker);
      RunReference(MIXRT_OP_UPDATE_SCALE, {&found_inf},
                   {&scale_want, &tracker_want}, &attrs);
      HostTensor scale_got = Scalar(MIXRT_DTYPE_F32, 65536),
                 tracker_got = Scalar(MIXRT_DTYPE_I32, tracker);
      RunElementwiseOnHost(
          gpu::UpdateScaleFunctor{attrs, F32(found_inf), F32(scale_got),
                                  static_cast<int32_t*>(tracker_got.data())},
          1);
      EXPECT_EQ(scale_got.Get(0), scale_want.Get(0));
      EXPECT_EQ(tracker_got.Get(0), tracker_want.Get(0));
    }
  }
}

TEST(OptimizerFunctors, SgdWithMomentumNesterovAndGuards) {
  for (double found : {0.0, 1.0}) {
    for (uint32_t nesterov : {0u, 1u}) {
      const MixrtSgdAttrs attrs{
          sizeof(MixrtSgdAttrs),
          nullptr,
          MIXRT_OPTIM_HAS_GRAD_SCALE | MIXRT_OPTIM_HAS_FOUND_INF,
          0.1,
          0.9,
          0.1,
          0.01,
          nesterov,
          0};
      HostTensor p(MIXRT_DTYPE_F32, {300}), buf(MIXRT_DTYPE_F32, {300});
      p.FillRandom(30);
      buf.FillRandom(31);
      const HostTensor g = HostTensor(MIXRT_DTYPE_BF16, {300}).FillRandom(32);
      const HostTensor scale = Scalar(MIXRT_DTYPE_F32, 512);
      const HostTensor found_inf = Scalar(MIXRT_DTYPE_F32, found);
      HostTensor p_want = p.Clone(), buf_want = buf.Clone();
      RunReference(MIXRT_OP_SGD_STEP, {&g, &scale, &found_inf},
                   {&p_want, &buf_want}, &attrs);
      gpu::StepGuards guards{F32(scale), F32(found_inf)};
      // The updates add terms of the parameters' size (~1) in f32: the
      // error is absolute at that scale (tolerances below use scale 1).
      RunElementwiseOnHost(
          gpu::SgdFunctor{p.device(), g.device(), buf.device(), attrs, guards},
          300);
      ExpectNear(p.Values(), p_want.Values(), 1e-6, 1.0, "sgd param");
      ExpectNear(buf.Values(), buf_want.Values(), 1e-6, 1.0, "sgd momentum");
    }
  }
}

// Plain and AMSGrad (a maximum above some of exp_avg_sq's new values and
// below others), stepped and skipped, against the reference plugin.
TEST(OptimizerFunctors, AdamWStepAndCount) {
  for (uint32_t amsgrad : {0u, MIXRT_OPTIM_AMSGRAD}) {
    for (double found : {0.0, 1.0}) {
      const MixrtAdamWAttrs attrs{sizeof(MixrtAdamWAttrs),
                                  nullptr,
                                  MIXRT_OPTIM_HAS_FOUND_INF | amsgrad,
                                  1e-3,
                                  0.9,
                                  0.999,
                                  1e-8,
                                  0.01};
      HostTensor p(MIXRT_DTYPE_F32, {257}), m(MIXRT_DTYPE_F32, {257}),
          v(MIXRT_DTYPE_F32, {257}), v_max(MIXRT_DTYPE_F32, {257});
      p.FillRandom(40);
      m.FillRandom(41, 0.1);
      v.FillRandom(42, 0.1);
      v_max.FillRandom(44, 0.1);
      for (int64_t i = 0; i < 257; ++i) {
        v.Set(i, std::fabs(v.Get(i)));
        v_max.Set(i, std::fabs(v_max.Get(i)));
      }
      HostTensor step = Scalar(MIXRT_DTYPE_F32, 4);
      const HostTensor g = HostTensor(MIXRT_DTYPE_F32, {257}).FillRandom(43);
      const HostTensor found_inf = Scalar(MIXRT_DTYPE_F32, found);
      HostTensor pw = p.Clone(), mw = m.Clone(), vw = v.Clone(),
                 sw = step.Clone(), xw = v_max.Clone();
      std::vector<const HostTensor*> outs = {&pw, &mw, &vw, &sw};
      if (amsgrad) outs.push_back(&xw);
      RunReference(MIXRT_OP_ADAMW_STEP, {&g, &found_inf}, outs, &attrs);
      const gpu::StepGuards guards{nullptr, F32(found_inf)};
      RunElementwiseOnHost(
          gpu::AdamWFunctor{p.device(), g.device(), m.device(), v.device(),
                            amsgrad ? v_max.device() : gpu::DeviceTensor(),
                            F32(step), attrs, guards},
          257);
      RunElementwiseOnHost(gpu::AdamWStepCountFunctor{F32(step), guards}, 1);
      ExpectNear(p.Values(), pw.Values(), 1e-6, 1.0, "adamw param");
      ExpectNear(m.Values(), mw.Values(), 1e-6, 1.0, "adamw exp_avg");
      ExpectNear(v.Values(), vw.Values(), 1e-5, 1e-6, "adamw exp_avg_sq");
      ExpectNear(v_max.Values(), xw.Values(), 1e-5, 1e-6,
                 "adamw max_exp_avg_sq");
      EXPECT_EQ(step.Get(0), sw.Get(0));
    }
  }
}

}  // namespace
}  // namespace mixrt::testing
