#include <cfloat>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "core/kernels/amp_kernels.h"
#include "core/kernels/optimizer_kernels.h"
#include "core/kernels/pointwise.h"
#include "core/tensor/factories.h"
#include "gtest/gtest.h"
#include "plugins/conformance/case_util.h"

namespace mixrt::conformance {

using namespace ::mixrt::kernels;  // The ops the cases run.

void AddOptimizerCases(std::vector<Case>* cases) {
  for (DType dtype : kFloatTypes) {
    cases->push_back(
        {absl::StrCat("non_finite_check_and_unscale/", DTypeName(dtype)),
         MIXRT_OP_CLASS_OPTIMIZER, dtype, [=](const Devices& d) {
           CompareOp(
               d, {{{513, 3}, dtype}, {{7}, dtype, Values::kSpecial}},
               [](const std::vector<Tensor>& in) -> Outputs {
                 const Device& dev = in[0].device();
                 auto found = zeros({1}, DType::kF32, dev);
                 auto inv = full({1}, 0.125, DType::kF32, dev);
                 auto a = in[0].clone();
                 if (!found.ok() || !inv.ok() || !a.ok()) {
                   return absl::InternalError("setup failed");
                 }
                 auto found2 = zeros({1}, DType::kF32, dev);
                 auto b = in[1].clone();
                 absl::Status s =
                     non_finite_check_and_unscale_({*a}, *found, *inv);
                 if (s.ok()) {
                   s = non_finite_check_and_unscale_({*a, *b}, *found2, *inv);
                 }
                 if (!s.ok()) return s;
                 return std::vector<Tensor>{*a, *found, *b, *found2};
               },
               Fixed(ExactTolerance(dtype)), kSeed);
         }});
  }
  cases->push_back(
      {"optimizer/sgd_and_adamw_scaled", MIXRT_OP_CLASS_OPTIMIZER, DType::kF32,
       [](const Devices& d) {
         CompareOp(
             d, {{{513, 7}}, {{513, 7}}, {{513, 7}, DType::kF16}},
             [](const std::vector<Tensor>& in) -> Outputs {
               const Device& dev = in[0].device();
               auto p = in[0].clone();
               auto buf = zeros({513, 7}, DType::kF32, dev);
               auto p2 = in[0].clone();
               auto m = zeros({513, 7}, DType::kF32, dev);
               auto v = zeros({513, 7}, DType::kF32, dev);
               auto step = zeros({1}, DType::kF32, dev);
               auto scale = full({1}, 1024, DType::kF32, dev);
               auto no_inf = zeros({1}, DType::kF32, dev);
               if (!p.ok() || !buf.ok() || !p2.ok() || !m.ok() || !v.ok() ||
                   !step.ok() || !scale.ok() || !no_inf.ok()) {
                 return absl::InternalError("setup failed");
               }
               MixrtSgdAttrs sgd{};
               sgd.lr = 0.1;
               sgd.momentum = 0.9;
               sgd.weight_decay = 1e-4;
               sgd.nesterov = 1;
               MixrtAdamWAttrs adam{};
               adam.lr = 1e-3;
               adam.beta1 = 0.9;
               adam.beta2 = 0.999;
               adam.eps = 1e-8;
               adam.weight_decay = 0.01;
               for (int i = 0; i < 3; ++i) {
                 sgd.first_step = i == 0;
                 // f16 gradients of f32 master weights, scaled by 1024.
                 absl::Status s =
                     sgd_step_(*p, in[2], *buf, sgd, {*scale, *no_inf});
                 if (s.ok()) {
                   s = adamw_step_(*p2, in[1], *m, *v, *step, adam,
                                   {*scale, *no_inf});
                 }
                 if (!s.ok()) return s;
               }
               return std::vector<Tensor>{*p, *buf, *p2, *m, *v, *step};
             },
             Fixed({1e-5, 1e-6, {}}), kSeed);
       }});
  // ABI 1.2: AMSGrad. A large first gradient, then smaller ones, so the
  // running maximum stays above exp_avg_sq and decides the steps.
  cases->push_back(
      {"optimizer/adamw_amsgrad", MIXRT_OP_CLASS_OPTIMIZER, DType::kF32,
       [](const Devices& d) {
         CompareOp(
             d, {{{513, 7}}, {{513, 7}}},
             [](const std::vector<Tensor>& in) -> Outputs {
               const Device& dev = in[0].device();
               auto p = in[0].clone();
               auto m = zeros({513, 7}, DType::kF32, dev);
               auto v = zeros({513, 7}, DType::kF32, dev);
               auto v_max = zeros({513, 7}, DType::kF32, dev);
               auto step = zeros({1}, DType::kF32, dev);
               auto large = scale(in[1], 8.0);
               if (!p.ok() || !m.ok() || !v.ok() || !v_max.ok() || !step.ok() ||
                   !large.ok()) {
                 return absl::InternalError("setup failed");
               }
               MixrtAdamWAttrs adam{};
               adam.lr = 1e-2;
               adam.beta1 = 0.9;
               adam.beta2 = 0.9;
               adam.eps = 1e-8;
               adam.weight_decay = 0.01;
               for (int i = 0; i < 4; ++i) {
                 absl::Status s = adamw_step_(*p, i == 0 ? *large : in[1], *m,
                                              *v, *step, adam, {}, *v_max);
                 if (!s.ok()) return s;
               }
               return std::vector<Tensor>{*p, *m, *v, *v_max, *step};
             },
             Fixed({1e-5, 1e-6, {}}), kSeed);
       }});
  // ABI 1.1: one launch steps a parameter group (a plugin without the op
  // is stepped parameter by parameter by the host, which must agree too).
  cases->push_back({"optimizer/multi_tensor_sgd", MIXRT_OP_CLASS_OPTIMIZER,
                    DType::kF32, [](const Devices& d) {
                      CompareOp(
                          d,
                          {{{513, 7}},
                           {{33}},
                           {{513, 7}, DType::kF16},
                           {{33}, DType::kBF16}},
                          [](const std::vector<Tensor>& in) -> Outputs {
                            const Device& dev = in[0].device();
                            auto p0 = in[0].clone();
                            auto p1 = in[1].clone();
                            auto b0 = zeros({513, 7}, DType::kF32, dev);
                            auto b1 = zeros({33}, DType::kF32, dev);
                            auto scale = full({1}, 1024, DType::kF32, dev);
                            auto no_inf = zeros({1}, DType::kF32, dev);
                            auto inf = full({1}, 1, DType::kF32, dev);
                            if (!p0.ok() || !p1.ok() || !b0.ok() || !b1.ok() ||
                                !scale.ok() || !no_inf.ok() || !inf.ok()) {
                              return absl::InternalError("setup failed");
                            }
                            MixrtSgdAttrs sgd{};
                            sgd.lr = 0.1;
                            sgd.momentum = 0.9;
                            sgd.dampening = 0.1;
                            sgd.weight_decay = 1e-4;
                            for (int i = 0; i < 4; ++i) {
                              sgd.first_step = i == 0;
                              // f16 and bf16 gradients scaled by 1024; the last
                              // step found an inf and changes nothing.
                              absl::Status s = multi_tensor_sgd_step_(
                                  {*p0, *p1}, {in[2], in[3]}, {*b0, *b1}, sgd,
                                  {*scale, i == 3 ? *inf : *no_inf});
                              if (!s.ok()) return s;
                            }
                            return std::vector<Tensor>{*p0, *b0, *p1, *b1};
                          },
                          Fixed({1e-5, 1e-6, {}}), kSeed);
                    }});
  cases->push_back(
      {"optimizer/update_scale_trajectory", MIXRT_OP_CLASS_OPTIMIZER,
       DType::kF32, [](const Devices& d) {
         std::vector<double> trajectory[2];
         const Device devices[2] = {d.plugin, d.reference};
         for (int k = 0; k < 2; ++k) {
           auto scale = full({1}, 65536, DType::kF32, devices[k]);
           auto tracker = zeros({1}, DType::kI32, devices[k]);
           CONFORMANCE_ASSERT_RAN(scale.status());
           CONFORMANCE_ASSERT_RAN(tracker.status());
           for (int step = 0; step < 12; ++step) {
             auto found =
                 full({1}, step % 5 == 4 ? 1.0 : 0.0, DType::kF32, devices[k]);
             CONFORMANCE_ASSERT_RAN(found.status());
             CONFORMANCE_ASSERT_RAN(
                 update_scale_(*scale, *tracker, *found, 2.0, 0.5, 3));
             trajectory[k].push_back(*scale->item());
             trajectory[k].push_back(*tracker->item());
           }
         }
         EXPECT_EQ(trajectory[0], trajectory[1]);
       }});
  // ABI 1.1: a non-finite inv_scale is an overflow (found_inf set, nothing
  // written), and a backed-off scale stops at FLT_MIN instead of 0.
  cases->push_back({"optimizer/scale_never_collapses", MIXRT_OP_CLASS_OPTIMIZER,
                    DType::kF32, [](const Devices& d) {
                      auto grad = full({5}, 0.0, DType::kF32, d.plugin);
                      auto found = zeros({1}, DType::kF32, d.plugin);
                      auto inv = full({1}, INFINITY, DType::kF32, d.plugin);
                      CONFORMANCE_ASSERT_RAN(grad.status());
                      CONFORMANCE_ASSERT_RAN(found.status());
                      CONFORMANCE_ASSERT_RAN(inv.status());
                      CONFORMANCE_ASSERT_RAN(
                          non_finite_check_and_unscale_({*grad}, *found, *inv));
                      EXPECT_EQ(*found->item(), 1.0);
                      EXPECT_EQ(*grad->to_double_vector(),
                                std::vector<double>(5, 0.0));
                      auto scale = full({1}, 1e-37, DType::kF32, d.plugin);
                      auto tracker = zeros({1}, DType::kI32, d.plugin);
                      CONFORMANCE_ASSERT_RAN(scale.status());
                      CONFORMANCE_ASSERT_RAN(tracker.status());
                      for (int i = 0; i < 8; ++i) {
                        CONFORMANCE_ASSERT_RAN(update_scale_(
                            *scale, *tracker, *found, 2.0, 0.5, 2000));
                      }
                      EXPECT_EQ(*scale->item(), FLT_MIN);
                    }});
  // torch._amp_update_scale_ multiplies the f32 scale by the double factor
  // and rounds once; a plugin rounding the factor to f32 first leaves
  // PyTorch's trajectory within a few updates for factors like 1.1 and 0.3.
  cases->push_back(
      {"optimizer/update_scale_rounds_like_pytorch", MIXRT_OP_CLASS_OPTIMIZER,
       DType::kF32, [](const Devices& d) {
         auto scale = full({1}, 1000, DType::kF32, d.plugin);
         auto tracker = zeros({1}, DType::kI32, d.plugin);
         CONFORMANCE_ASSERT_RAN(scale.status());
         CONFORMANCE_ASSERT_RAN(tracker.status());
         float want = 1000.0f;
         for (int step = 0; step < 12; ++step) {
           const bool inf = step >= 8;
           auto found = full({1}, inf ? 1.0 : 0.0, DType::kF32, d.plugin);
           CONFORMANCE_ASSERT_RAN(found.status());
           CONFORMANCE_ASSERT_RAN(
               update_scale_(*scale, *tracker, *found, 1.1, 0.3, 1));
           want = static_cast<float>(static_cast<double>(want) *
                                     (inf ? 0.3 : 1.1));
           ASSERT_EQ(*scale->item(), want) << "after update " << step;
         }
       }});
}

}  // namespace mixrt::conformance
