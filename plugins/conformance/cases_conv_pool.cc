#include <cmath>

#include "absl/strings/str_cat.h"
#include "core/kernels/conv2d.h"
#include "core/kernels/pointwise.h"
#include "core/kernels/pool2d.h"
#include "plugins/conformance/case_util.h"

namespace mixrt::conformance {

using namespace ::mixrt::kernels;  // The ops the cases run.

void AddConvPoolCases(std::vector<Case>* cases) {
  struct C {
    const char* name;
    std::vector<int64_t> x, w;
    Conv2dOptions o;
  };
  Conv2dOptions strided;
  strided.stride = {2, 2};
  strided.padding = {1, 1};
  Conv2dOptions dilated;
  dilated.dilation = {2, 2};
  dilated.padding = {2, 2};
  Conv2dOptions grouped;
  grouped.groups = 3;
  grouped.padding = {1, 1};
  grouped.activation = MIXRT_ACTIVATION_RELU;
  Conv2dOptions grouped_relu_single;
  grouped_relu_single.activation = MIXRT_ACTIVATION_RELU;
  const C convs[] = {
      {"resnet_like", {2, 16, 14, 14}, {32, 16, 3, 3}, strided},
      {"dilated", {3, 5, 11, 9}, {7, 5, 3, 3}, dilated},
      {"grouped_relu", {2, 9, 8, 8}, {6, 3, 3, 3}, grouped},
      {"pointwise_1x1", {4, 8, 5, 7}, {12, 8, 1, 1}, Conv2dOptions()},
      {"special_relu", {1, 2, 5, 5}, {3, 2, 3, 3}, grouped_relu_single},
  };
  for (DType dtype : kFloatTypes) {
    for (const C& c : convs) {
      const std::string base =
          absl::StrCat("conv2d/", c.name, "/", DTypeName(dtype));
      // Inner products of C/groups * kh * kw terms of size ~1.
      const double k = static_cast<double>(c.w[1] * c.w[2] * c.w[3]);
      Tolerance tol = TranscendentalTolerance(dtype);
      tol.atol = (k + 2) * 4 * std::ldexp(1.0, -23) * std::sqrt(k) +
                 4 * UnitRoundoff(dtype) * std::sqrt(k);
      // NaN and infinities in the input must survive the activation.
      const Values xv = std::string(c.name) == "special_relu" ? Values::kSpecial
                                                              : Values::kNormal;
      const std::vector<InputSpec> fwd = {
          {c.x, dtype, xv}, {c.w, dtype}, {{c.w[0]}, dtype}};
      cases->push_back(
          {base, MIXRT_OP_CLASS_CONV, dtype, [=](const Devices& d) {
             CompareOp(
                 d, fwd,
                 [=](const std::vector<Tensor>& in) {
                   return One(conv2d(in[0], in[1], in[2], c.o));
                 },
                 Fixed(tol), kSeed);
           }});
      // grad_out has the forward output's shape.
      std::vector<int64_t> y = {
          c.x[0], c.w[0],
          Conv2dOutputSize(c.x[2], c.w[2], c.o.stride[0], c.o.padding[0],
                           c.o.dilation[0]),
          Conv2dOutputSize(c.x[3], c.w[3], c.o.stride[1], c.o.padding[1],
                           c.o.dilation[1])};
      Conv2dOptions plain = c.o;
      plain.activation = MIXRT_ACTIVATION_NONE;
      Tolerance btol = tol;
      btol.atol *= 4 * std::sqrt(static_cast<double>(y[0] * y[2] * y[3]));
      cases->push_back(
          {absl::StrCat(base, "/backward"), MIXRT_OP_CLASS_CONV, dtype,
           [=](const Devices& d) {
             CompareOp(
                 d, {{y, dtype}, {c.w, dtype}, {c.x, dtype}},
                 [=](const std::vector<Tensor>& in) -> Outputs {
                   auto gx = conv2d_backward_data(in[0], in[1], c.x, plain);
                   if (!gx.ok()) return gx.status();
                   auto gw =
                       conv2d_backward_weights(in[0], in[2], c.w, true, plain);
                   if (!gw.ok()) return gw.status();
                   return std::vector<Tensor>{*gx, gw->grad_weight,
                                              gw->grad_bias};
                 },
                 Fixed(btol), kSeed);
           }});
    }
    for (MixrtPoolKind kind : {MIXRT_POOL_MAX, MIXRT_POOL_AVG}) {
      Pool2dOptions o;
      o.kind = kind;
      o.kernel = {3, 3};
      o.stride = {2, 2};
      o.padding = {1, 1};
      const std::string base =
          absl::StrCat("pool2d/", kind == MIXRT_POOL_MAX ? "max" : "avg", "/",
                       DTypeName(dtype));
      const InputSpec x{{2, 3, 13, 11}, dtype};
      // Averages sum 9 terms of |x| < ~4 (and may cancel): f32 accumulation
      // error on that scale.
      Tolerance tol = TranscendentalTolerance(dtype);
      tol.atol =
          9 * 4 * 4 * UnitRoundoff(DType::kF32) + 2 * UnitRoundoff(dtype);
      cases->push_back(
          {base, MIXRT_OP_CLASS_POOL, dtype, [=](const Devices& d) {
             CompareOp(
                 d, {x},
                 [=](const std::vector<Tensor>& in) {
                   return One(pool2d(in[0], o));
                 },
                 Fixed(tol), kSeed);
           }});
      cases->push_back({absl::StrCat(base, "/backward"), MIXRT_OP_CLASS_POOL,
                        dtype, [=](const Devices& d) {
                          CompareOp(
                              d, {x, {{2, 3, 7, 6}, dtype}},
                              [=](const std::vector<Tensor>& in) {
                                return One(pool2d_backward(in[1], in[0], o));
                              },
                              Fixed(tol), kSeed);
                        }});  // A CNN's 2x2, stride-2 pool without padding
                              // (every window inside
      // the plane), over NaN, infinities and signed zeros too: a NaN in a
      // window is the window's maximum and poisons its average.
      Pool2dOptions o2 = o;
      o2.kernel = {2, 2};
      o2.padding = {0, 0};
      for (Values values : {Values::kNormal, Values::kSpecial}) {
        const InputSpec x2{{3, 2, 8, 14}, dtype, values};
        cases->push_back(
            {absl::StrCat(base, "/2x2",
                          values == Values::kSpecial ? "/special" : ""),
             MIXRT_OP_CLASS_POOL, dtype, [=](const Devices& d) {
               CompareOp(
                   d, {x2},
                   [=](const std::vector<Tensor>& in) {
                     return One(pool2d(in[0], o2));
                   },
                   Fixed(tol), kSeed);
             }});
      }
    }
  }
}

}  // namespace mixrt::conformance
