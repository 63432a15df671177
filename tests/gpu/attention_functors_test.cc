// The GPU plugins' fused attention functors run on the host against the
// reference plugin (softmax attention in double): plain, causal, a bool mask
// broadcast over groups (with rows that see no key), an additive mask,
// dropout, NaN and inf inputs, and the backward's three gradients.
#include "backends/gpu/attention_functors.h"

#include <cmath>
#include <vector>

#include "gtest/gtest.h"
#include "tests/gpu/host_launch.h"
#include "tests/gpu/host_tensor.h"

namespace mixrt::testing {
namespace {

constexpr int64_t kG = 3, kL = 37, kS = 29, kE = 8, kEv = 6;

enum class Variant { kPlain, kCausal, kBoolMask, kAdditiveMask, kDropout };

struct Inputs {
  HostTensor q, k, v, mask;
  MixrtAttentionAttrs attrs{};
};

Inputs Make(MixrtDtype dtype, Variant variant) {
  Inputs in{HostTensor(dtype, {kG, kL, kE}).FillRandom(1),
            HostTensor(dtype, {kG, kS, kE}).FillRandom(2),
            HostTensor(dtype, {kG, kS, kEv}).FillRandom(3),
            HostTensor(MIXRT_DTYPE_F32, {1})};
  in.attrs.struct_size = sizeof(MixrtAttentionAttrs);
  in.attrs.scale = 0.4;
  in.attrs.is_causal = variant == Variant::kCausal;
  if (variant == Variant::kDropout) {
    in.attrs.dropout_p = 0.25;
    in.attrs.seed = 9;
    in.attrs.offset = 3;
  }
  if (variant == Variant::kBoolMask) {
    // [L, S] storage seen as [G, L, S] with a 0 group stride; query 4 sees
    // no key (output 0, log-normalizer -inf).
    HostTensor bits(MIXRT_DTYPE_BOOL, {kL, kS});
    for (int64_t i = 0; i < kL; ++i) {
      for (int64_t j = 0; j < kS; ++j) {
        bits.Set(i * kS + j, i != 4 && ((2 * i + j) % 5 != 0 || i == j));
      }
    }
    in.mask = bits.Strided({kG, kL, kS}, {0, kS, 1});
    in.attrs.mask_kind = MIXRT_ATTENTION_MASK_BOOL;
  }
  if (variant == Variant::kAdditiveMask) {
    in.mask = HostTensor(MIXRT_DTYPE_F32, {kG, kL, kS}).FillRandom(4);
    in.attrs.mask_kind = MIXRT_ATTENTION_MASK_ADDITIVE;
  }
  return in;
}

gpu::AttentionProblem Problem(const Inputs& in) {
  gpu::AttentionProblem p;
  p.q = in.q.device();
  p.k = in.k.device();
  p.v = in.v.device();
  p.mask = in.mask.device();
  p.groups = kG;
  p.queries = kL;
  p.keys = kS;
  p.head_dim = kE;
  p.value_dim = kEv;
  p.scale = static_cast<float>(in.attrs.scale);
  p.is_causal = in.attrs.is_causal != 0;
  p.mask_kind = in.attrs.mask_kind;
  p.dropout_p = in.attrs.dropout_p;
  p.seed = in.attrs.seed;
  p.offset = in.attrs.offset;
  return p;
}

std::vector<const HostTensor*> ForwardInputs(const Inputs& in) {
  std::vector<const HostTensor*> v = {&in.q, &in.k, &in.v};
  if (in.attrs.mask_kind != MIXRT_ATTENTION_MASK_NONE) v.push_back(&in.mask);
  return v;
}

struct Forward {
  HostTensor out, lse;
};

Forward RunForward(const Inputs& in) {
  Forward f{HostTensor(in.q.dtype(), {kG, kL, kEv}),
            HostTensor(MIXRT_DTYPE_F32, {kG, kL})};
  HostTensor acc(MIXRT_DTYPE_F32, {kG, kL, kEv});
  RunElementwiseOnHost(
      gpu::AttentionForwardRows{Problem(in), f.out.device(),
                                static_cast<float*>(f.lse.data()),
                                static_cast<float*>(acc.data())},
      kG * kL);
  return f;
}

Forward ReferenceForward(const Inputs& in) {
  Forward f{HostTensor(in.q.dtype(), {kG, kL, kEv}),
            HostTensor(MIXRT_DTYPE_F32, {kG, kL})};
  RunReference(MIXRT_OP_SCALED_DOT_PRODUCT_ATTENTION, ForwardInputs(in),
               {&f.out, &f.lse}, &in.attrs);
  return f;
}

const char* Name(Variant v) {
  switch (v) {
    case Variant::kPlain:
      return "plain";
    case Variant::kCausal:
      return "causal";
    case Variant::kBoolMask:
      return "bool mask";
    case Variant::kAdditiveMask:
      return "additive mask";
    case Variant::kDropout:
      return "dropout";
  }
  return "";
}

constexpr Variant kVariants[] = {Variant::kPlain, Variant::kCausal,
                                 Variant::kBoolMask, Variant::kAdditiveMask,
                                 Variant::kDropout};
constexpr MixrtDtype kDtypes[] = {MIXRT_DTYPE_F32, MIXRT_DTYPE_BF16,
                                  MIXRT_DTYPE_F16};

TEST(AttentionFunctors, ForwardMatchesTheReference) {
  for (MixrtDtype dtype : kDtypes) {
    for (Variant v : kVariants) {
      const Inputs in = Make(dtype, v);
      const Forward got = RunForward(in), want = ReferenceForward(in);
      const std::string what = std::string(Name(v)) + " dtype " +
                               std::to_string(static_cast<int>(dtype));
      // One rounding into the dtype after f32 sums of <= 29 terms; each out
      // is a weighted mean of v (|v| ~ 1), which cancellation can make
      // small: the scale 1 is v's magnitude.
      ExpectNear(got.out.Values(), want.out.Values(), StoreTolerance(dtype), 1,
                 what + " out");
      ExpectNear(got.lse.Values(), want.lse.Values(), 1e-5, 1, what + " lse");
    }
  }
}

TEST(AttentionFunctors, NaNAndInfInputsReachTheRowsTheDefinitionSays) {
  for (bool causal : {false, true}) {
    Inputs in =
        Make(MIXRT_DTYPE_F32, causal ? Variant::kCausal : Variant::kPlain);
    in.q.Set(5 * kE + 1, NAN);         // Row 5: every score NaN.
    in.q.Set(9 * kE + 2, INFINITY);    // Row 9: scores +-inf or NaN.
    in.k.Set(20 * kE + 3, -INFINITY);  // Key 20: hidden from causal rows < 20.
    const Forward got = RunForward(in), want = ReferenceForward(in);
    ExpectNear(got.out.Values(), want.out.Values(), 1e-5, 1,
               causal ? "special causal out" : "special out");
    ExpectNear(got.lse.Values(), want.lse.Values(), 1e-5, 1,
               causal ? "special causal lse" : "special lse");
    EXPECT_TRUE(std::isnan(got.out.Get(5 * kEv)));
  }
}

TEST(AttentionFunctors, BackwardMatchesTheReference) {
  for (MixrtDtype dtype : kDtypes) {
    for (Variant v : kVariants) {
      const Inputs in = Make(dtype, v);
      const Forward fwd = ReferenceForward(in);
      const HostTensor grad_out =
          HostTensor(dtype, {kG, kL, kEv}).FillRandom(5);
      std::vector<const HostTensor*> inputs = {&grad_out, &in.q,    &in.k,
                                               &in.v,     &fwd.out, &fwd.lse};
      if (in.attrs.mask_kind != MIXRT_ATTENTION_MASK_NONE) {
        inputs.push_back(&in.mask);
      }
      HostTensor want_q(dtype, {kG, kL, kE}), want_k(dtype, {kG, kS, kE}),
          want_v(dtype, {kG, kS, kEv});
      RunReference(MIXRT_OP_SCALED_DOT_PRODUCT_ATTENTION_BACKWARD, inputs,
                   {&want_q, &want_k, &want_v}, &in.attrs);

      HostTensor got_q(dtype, {kG, kL, kE}), got_k(dtype, {kG, kS, kE}),
          got_v(dtype, {kG, kS, kEv});
      HostTensor d(MIXRT_DTYPE_F32, {kG, kL}),
          dq(MIXRT_DTYPE_F32, {kG, kL, kE}),
          dkv(MIXRT_DTYPE_F32, {kG, kS, kE + kEv});
      const float* lse = static_cast<const float*>(fwd.lse.data());
      const gpu::AttentionProblem p = Problem(in);
      RunElementwiseOnHost(
          gpu::AttentionRowDots{grad_out.device(), fwd.out.device(), kEv,
                                static_cast<float*>(d.data())},
          kG * kL);
      RunElementwiseOnHost(
          gpu::AttentionGradQRows{p, grad_out.device(), lse,
                                  static_cast<float*>(d.data()), got_q.device(),
                                  static_cast<float*>(dq.data())},
          kG * kL);
      RunElementwiseOnHost(
          gpu::AttentionGradKVRows{
              p, grad_out.device(), lse, static_cast<float*>(d.data()),
              got_k.device(), got_v.device(), static_cast<float*>(dkv.data())},
          kG * kS);
      const std::string what = std::string(Name(v)) + " dtype " +
                               std::to_string(static_cast<int>(dtype));
      // Sums of <= 37 f32 products of f32-computed weights, rounded once;
      // the scale absorbs their cancellation.
      const double tol = StoreTolerance(dtype) + 1e-5;
      ExpectNear(got_q.Values(), want_q.Values(), tol, 0.05, what + " dq");
      ExpectNear(got_k.Values(), want_k.Values(), tol, 0.05, what + " dk");
      ExpectNear(got_v.Values(), want_v.Values(), tol, 0.05, what + " dv");
    }
  }
}

}  // namespace
}  // namespace mixrt::testing
