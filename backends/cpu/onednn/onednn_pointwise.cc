#include "backends/cpu/onednn/onednn_pointwise.h"

#include <cmath>
#include <optional>

#include "absl/strings/str_cat.h"
#include "backends/cpu/onednn/onednn_compat.h"
#include "backends/cpu/onednn/onednn_context.h"

namespace mixrt::cpu {
namespace {

struct Eltwise {
  dnnl::algorithm algorithm;
  float alpha = 0, beta = 0;
};

// The oneDNN eltwise algorithm computing `kind` to the ABI's contract, if
// there is one. The conformance suite rejected oneDNN 2.6.3's jit versions
// of relu (maps NaN to 0), exp (NaN to inf), clip (NaN to the bound, and no
// gradient at the bounds), pow(x, -0.5) (negative x to 0 instead of NaN),
// log (35 f32 ulps off) and both gelus (cancellation for x < -2): those stay
// on the plugin's loops, as does log1p, which oneDNN lacks. A NaN turned
// into a number would hide an overflow from the grad scaler.
std::optional<Eltwise> ToEltwise(const MixrtPointwiseAttrs& a) {
  const auto alpha = static_cast<float>(a.alpha);
  const auto beta = static_cast<float>(a.beta);
  switch (static_cast<MixrtUnaryKind>(a.kind)) {
    case MIXRT_UNARY_NEG:
      return Eltwise{dnnl::algorithm::eltwise_linear, -1.f, 0.f};
    case MIXRT_UNARY_ABS:
      return Eltwise{dnnl::algorithm::eltwise_abs};
    case MIXRT_UNARY_LEAKY_RELU:
      return Eltwise{dnnl::algorithm::eltwise_relu, alpha};
    case MIXRT_UNARY_SILU:
      return Eltwise{dnnl::algorithm::eltwise_swish, 1.f};
    case MIXRT_UNARY_SIGMOID:
      return Eltwise{dnnl::algorithm::eltwise_logistic};
    case MIXRT_UNARY_TANH:
      return Eltwise{dnnl::algorithm::eltwise_tanh};
    case MIXRT_UNARY_SQRT:
      return Eltwise{dnnl::algorithm::eltwise_sqrt};
    case MIXRT_UNARY_POW_SCALAR:
      return Eltwise{dnnl::algorithm::eltwise_pow, 1.f, alpha};
    case MIXRT_UNARY_SCALE:
      return Eltwise{dnnl::algorithm::eltwise_linear, alpha, beta};
    default:
      return std::nullopt;
  }
}

// Below this many elements the plugin's own loops win: a oneDNN call's
// primitive lookup (a string key) and three memory objects cost ~3 us,
// more than a few thousand elements of work.
constexpr int64_t kMinElements = 16 * 1024;

bool Supported(const sdk::KernelCall& call) {
  if (call.outputs[0].numel() < kMinElements) return false;
  const MixrtDtype dtype = call.outputs[0].dtype();
  if (dtype != MIXRT_DTYPE_F32 && dtype != MIXRT_DTYPE_BF16) return false;
  for (const sdk::TensorRef& t : call.inputs) {
    if (t.dtype() != dtype || !t.is_contiguous()) return false;
  }
  return call.outputs[0].is_contiguous() && call.outputs[0].numel() > 0;
}

// A 1-d view of n dense elements: eltwise and binary ignore the shape.
dnnl::memory::desc Flat(const sdk::TensorRef& t) {
  return dnnl::memory::desc({t.numel()}, *OneDnnType(t.dtype()),
                            dnnl::memory::dims{1});
}

}  // namespace

bool OneDnnUnary(const sdk::KernelCall& call, const MixrtPointwiseAttrs& attrs,
                 bool backward) {
  if (!Supported(call)) return false;
  const std::optional<Eltwise> e = ToEltwise(attrs);
  if (!e) return false;
  const sdk::TensorRef& out = call.outputs[0];
  const dnnl::memory::desc md = Flat(out);
  const std::string key =
      absl::StrCat(backward ? "eltwise_bwd|" : "eltwise_fwd|",
                   static_cast<int>(e->algorithm), "|", e->alpha, "|", e->beta,
                   "|", out.dtype(), "|", out.numel());
  auto prim = TryGetPrimitive(key, [&] {
    const dnnl::eltwise_forward::primitive_desc fwd =
        EltwiseForwardPd(e->algorithm, md, e->alpha, e->beta);
    if (!backward) {
      return CachedPrimitive{dnnl::eltwise_forward(fwd), fwd.impl_info_str()};
    }
    const dnnl::eltwise_backward::primitive_desc bwd =
        EltwiseBackwardPd(e->algorithm, md, e->alpha, e->beta, fwd);
    return CachedPrimitive{dnnl::eltwise_backward(bwd), bwd.impl_info_str()};
  });
  if (prim == nullptr) return false;
  if (backward) {
    // inputs (grad_out, x): the gradient at x.
    prim->primitive.execute(
        ThreadStream(), {{DNNL_ARG_DIFF_DST, Memory(md, call.inputs[0].data())},
                         {DNNL_ARG_SRC, Memory(md, call.inputs[1].data())},
                         {DNNL_ARG_DIFF_SRC, Memory(md, out.data())}});
  } else {
    prim->primitive.execute(ThreadStream(),
                            {{DNNL_ARG_SRC, Memory(md, call.inputs[0].data())},
                             {DNNL_ARG_DST, Memory(md, out.data())}});
  }
  ThreadStream().wait();
  return true;
}

bool OneDnnBinary(const sdk::KernelCall& call, MixrtBinaryKind kind) {
  if (!Supported(call)) return false;
  dnnl::algorithm algorithm;
  switch (kind) {
    case MIXRT_BINARY_ADD:
      algorithm = dnnl::algorithm::binary_add;
      break;
    case MIXRT_BINARY_SUB:
      algorithm = dnnl::algorithm::binary_sub;
      break;
    case MIXRT_BINARY_MUL:
      algorithm = dnnl::algorithm::binary_mul;
      break;
    case MIXRT_BINARY_DIV:
      algorithm = dnnl::algorithm::binary_div;
      break;
    default:
      // max/min: oneDNN's do not propagate NaN as PyTorch's do; pow: none.
      return false;
  }
  const sdk::TensorRef& out = call.outputs[0];
  const dnnl::memory::desc md = Flat(out);
  auto prim = TryGetPrimitive(
      absl::StrCat("binary|", kind, "|", out.dtype(), "|", out.numel()), [&] {
        const dnnl::binary::primitive_desc pd = BinaryPd(algorithm, md);
        return CachedPrimitive{dnnl::binary(pd), pd.impl_info_str()};
      });
  if (prim == nullptr) return false;
  prim->primitive.execute(ThreadStream(),
                          {{DNNL_ARG_SRC_0, Memory(md, call.inputs[0].data())},
                           {DNNL_ARG_SRC_1, Memory(md, call.inputs[1].data())},
                           {DNNL_ARG_DST, Memory(md, out.data())}});
  ThreadStream().wait();
  return true;
}

}  // namespace mixrt::cpu
