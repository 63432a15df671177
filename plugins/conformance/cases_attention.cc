// Fused scaled dot-product attention (ABI 1.1) and its backward against the
// reference plugin's double oracle: plain, causal, bool and additive masks,
// dropout; shapes that cross the CPU kernel's 128-row blocks and 512-key
// chunks (its online softmax rescales earlier chunks when a later one holds
// a larger score), with rows whose first chunk, or every key, is hidden.
// A plugin without the fused op is skipped (the host composes it instead).
#include <functional>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "core/kernels/attention.h"
#include "core/tensor/factories.h"
#include "gtest/gtest.h"
#include "mixrt/status_macros.h"
#include "plugins/conformance/case_util.h"

namespace mixrt::conformance {
namespace {

constexpr int64_t kGroups = 3, kQueries = 640, kKeys = 1100, kHead = 16,
                  kValue = 24;

enum class Variant { kPlain, kCausal, kBoolMask, kAdditiveMask, kDropout };

const char* Name(Variant v) {
  switch (v) {
    case Variant::kPlain:
      return "plain";
    case Variant::kCausal:
      return "causal";
    case Variant::kBoolMask:
      return "bool_mask";
    case Variant::kAdditiveMask:
      return "additive_mask";
    case Variant::kDropout:
      return "dropout";
  }
  return "";
}

// The variant's arguments on `device`: masks built from a fixed pattern
// (key j hidden from query i when (3 i + j) % 7 == 0, i != j; the bool mask
// also hides keys below 600 from every fifth query and every key from
// queries 5, 102, 199, ...: output 0, log-normalizer -inf), the same on
// both devices.
absl::StatusOr<kernels::FusedAttentionArgs> Args(Variant v,
                                                 const Device& device) {
  kernels::FusedAttentionArgs args;
  args.scale = 0.25;
  if (v == Variant::kCausal) args.is_causal = true;
  if (v == Variant::kDropout) {
    args.dropout_p = 0.2;
    args.seed = 77;
    args.offset = 5;
  }
  if (v == Variant::kBoolMask || v == Variant::kAdditiveMask) {
    std::vector<int64_t> keep(kQueries * kKeys);
    std::vector<float> bias(kQueries * kKeys);
    for (int64_t i = 0; i < kQueries; ++i) {
      for (int64_t j = 0; j < kKeys; ++j) {
        keep[i * kKeys + j] = ((3 * i + j) % 7 != 0 || i == j) &&
                              !(i % 5 == 1 && j < 600) && i % 97 != 5;
        bias[i * kKeys + j] = static_cast<float>(((i + 2 * j) % 5) - 2) * 0.5f;
      }
    }
    if (v == Variant::kBoolMask) {
      MIXRT_ASSIGN_OR_RETURN(
          args.mask, from_ints(keep, {kQueries, kKeys}, DType::kBool, device));
    } else {
      MIXRT_ASSIGN_OR_RETURN(
          args.mask, from_floats(bias, {kQueries, kKeys}, DType::kF32, device));
    }
  }
  return args;
}

using ArgsOn =
    std::function<absl::StatusOr<kernels::FusedAttentionArgs>(const Device&)>;

// The forward (output and log-normalizers) of q, k, v drawn as `qkv`
// describes, with the arguments `args` makes on the tensors' device,
// against the oracle.
Case ForwardCase(std::string name, DType dtype, std::vector<InputSpec> qkv,
                 ArgsOn args_on) {
  // Weights and products are rounded to the dtype once or twice on the
  // way (bf16 weights into a bf16 GEMM); sums of 1100 terms in f32.
  const double u = UnitRoundoff(dtype);
  const Tolerance out_tol{8 * u + 1e-5, 8 * u + 1e-5, {}};
  const Tolerance lse_tol{1e-5, 1e-4, {}};
  return {std::move(name), MIXRT_OP_CLASS_MATMUL, dtype, [=](const Devices& d) {
            if (!HasFusedAttention(d.plugin)) {
              GTEST_SKIP() << "the plugin has no fused attention";
            }
            CompareOp(
                d, qkv,
                [=](const std::vector<Tensor>& in) -> Outputs {
                  MIXRT_ASSIGN_OR_RETURN(auto args, args_on(in[0].device()));
                  MIXRT_ASSIGN_OR_RETURN(auto o,
                                         kernels::scaled_dot_product_attention(
                                             in[0], in[1], in[2], args));
                  return std::vector<Tensor>{o.out, o.lse};
                },
                [=](int index, const std::vector<std::vector<double>>&) {
                  return index == 0 ? out_tol : lse_tol;
                },
                kSeed);
          }};
}

// Plain or causal attention with `scale`, no mask.
ArgsOn Unmasked(double scale, bool causal) {
  return [=](const Device&) -> absl::StatusOr<kernels::FusedAttentionArgs> {
    kernels::FusedAttentionArgs args;
    args.scale = scale;
    args.is_causal = causal;
    return args;
  };
}

// Head and value widths in 32s (64 and 32, as in GPT models) take the CPU
// plugin's AMX tiles in bf16 where the CPU has them, whose query rows and
// keys pad to 32: 200 queries and 1100 keys leave partial tiles in both,
// and NaN and inf in q take the path that masks scores in place.
void AddWideHeadCases(DType dtype, std::vector<Case>* cases) {
  constexpr int64_t kWideGroups = 2, kWideQueries = 200, kWideHead = 64,
                    kWideValue = 32;
  for (bool causal : {false, true}) {
    for (Values q_values : {Values::kNormal, Values::kSpecial}) {
      cases->push_back(ForwardCase(
          absl::StrCat("attention/wide_heads",
                       q_values == Values::kSpecial ? "_special" : "",
                       causal ? "_causal/" : "/", DTypeName(dtype)),
          dtype,
          {{{kWideGroups, kWideQueries, kWideHead}, dtype, q_values},
           {{kWideGroups, kKeys, kWideHead}, dtype},
           {{kWideGroups, kKeys, kWideValue}, dtype}},
          Unmasked(0.125, causal)));
    }
  }
}

}  // namespace

void AddAttentionCases(std::vector<Case>* cases) {
  for (DType dtype : kFloatTypes) {
    // NaN and inf in q reach the output as the definition makes them (the
    // GradScaler finds overflow through them): never dropped as a key.
    for (bool causal : {false, true}) {
      cases->push_back(
          ForwardCase(absl::StrCat("attention/special",
                                   causal ? "_causal/" : "/", DTypeName(dtype)),
                      dtype,
                      {{{kGroups, kQueries, kHead}, dtype, Values::kSpecial},
                       {{kGroups, kKeys, kHead}, dtype},
                       {{kGroups, kKeys, kValue}, dtype}},
                      Unmasked(0.25, causal)));
    }
    for (Variant v : {Variant::kPlain, Variant::kCausal, Variant::kBoolMask,
                      Variant::kAdditiveMask, Variant::kDropout}) {
      const std::string base =
          absl::StrCat("attention/", Name(v), "/", DTypeName(dtype));
      const std::vector<InputSpec> qkv = {{{kGroups, kQueries, kHead}, dtype},
                                          {{kGroups, kKeys, kHead}, dtype},
                                          {{kGroups, kKeys, kValue}, dtype}};
      const double u = UnitRoundoff(dtype);
      cases->push_back(ForwardCase(base, dtype, qkv, [v](const Device& device) {
        return Args(v, device);
      }));
      std::vector<InputSpec> with_grad = qkv;
      with_grad.push_back({{kGroups, kQueries, kValue}, dtype});
      // dS is rounded to the dtype before two GEMMs of up to 1100 terms.
      const Tolerance grad_tol{32 * u + 1e-4, 64 * u + 1e-4, {}};
      cases->push_back(
          {absl::StrCat(base, "/backward"), MIXRT_OP_CLASS_MATMUL, dtype,
           [=](const Devices& d) {
             if (!HasFusedAttention(d.plugin)) {
               GTEST_SKIP() << "the plugin has no fused attention";
             }
             CompareOp(
                 d, with_grad,
                 [=](const std::vector<Tensor>& in) -> Outputs {
                   // Both devices backpropagate the reference's forward, so
                   // only the backward kernels are compared.
                   MIXRT_ASSIGN_OR_RETURN(auto ref_args, Args(v, d.reference));
                   std::vector<Tensor> on_ref;
                   for (int t = 0; t < 3; ++t) {
                     MIXRT_ASSIGN_OR_RETURN(Tensor r, in[t].to(d.reference));
                     on_ref.push_back(r);
                   }
                   MIXRT_ASSIGN_OR_RETURN(
                       auto fwd,
                       kernels::scaled_dot_product_attention(
                           on_ref[0], on_ref[1], on_ref[2], ref_args));
                   kernels::FusedAttentionOutput here;
                   MIXRT_ASSIGN_OR_RETURN(here.out, fwd.out.to(in[0].device()));
                   MIXRT_ASSIGN_OR_RETURN(here.lse, fwd.lse.to(in[0].device()));
                   MIXRT_ASSIGN_OR_RETURN(auto args, Args(v, in[0].device()));
                   return kernels::scaled_dot_product_attention_backward(
                       in[3], in[0], in[1], in[2], here, args);
                 },
                 Fixed(grad_tol), kSeed);
           }});
    }
    AddWideHeadCases(dtype, cases);
  }
}

}  // namespace mixrt::conformance
