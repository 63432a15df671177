// conv2d forward, backward data and backward weights on oneDNN. Tensors are
// passed in the caller's NCHW layout; f16 (which oneDNN 2.6 cannot convolve)
// is widened to f32 and the result rounded back.
#include "backends/cpu/kernels/cpu_conv.h"

#include <memory>
#include <unordered_map>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "backends/cpu/fusion/epilogue_chain.h"
#include "backends/cpu/fusion/fused_conv.h"
#include "backends/cpu/kernels/cpu_matmul.h"
#include "backends/cpu/kernels/epilogue.h"
#include "backends/cpu/kernels/float_rows.h"
#include "backends/cpu/kernels/parallel.h"
#include "backends/cpu/onednn/onednn_compat.h"
#include "backends/cpu/onednn/onednn_context.h"
#include "mixrt/status_macros.h"
#include "plugins/sdk/tensor_ref.h"

namespace mixrt::cpu {
namespace {

using sdk::TensorRef;

// A dense f32 (or pass-through) view of a tensor for oneDNN.
struct Operand {
  std::unique_ptr<float[]> buffer;
  std::vector<int64_t> strides;
  MixrtTensorDesc desc{};
  TensorRef ref;

  Operand(const TensorRef& t, bool widen, bool copy_in) : ref(t) {
    if (!widen) return;
    const int64_t n = t.numel();
    buffer.reset(new float[n > 0 ? n : 1]);
    strides.assign(t.ndim(), 1);
    for (int i = t.ndim() - 2; i >= 0; --i) {
      strides[i] = strides[i + 1] * t.dim(i + 1);
    }
    desc.struct_size = sizeof(desc);
    desc.data = buffer.get();
    desc.dtype = MIXRT_DTYPE_F32;
    desc.ndim = t.ndim();
    desc.shape = t.shape();
    desc.strides = strides.data();
    ref = TensorRef(desc);
    if (copy_in) {
      ParallelFor(n, 1 << 16, [&](int64_t b, int64_t e) {
        LoadRow(t.data(), t.dtype(), b, e - b, buffer.get() + b);
      });
    }
  }
  // Rounds a widened result into `t`.
  void StoreInto(const TensorRef& t) const {
    if (buffer == nullptr) return;
    ParallelFor(t.numel(), 1 << 16, [&](int64_t b, int64_t e) {
      StoreRow(buffer.get() + b, e - b, t.data(), t.dtype(), b);
    });
  }
};

// oneDNN wants grouped weights as [G, O/G, I/G, kh, kw].
dnnl::memory::desc WeightsDesc(const TensorRef& w, int groups) {
  if (groups == 1) return MemoryDesc(w);
  const int64_t o = w.dim(0), i = w.dim(1), kh = w.dim(2), kw = w.dim(3);
  return MemoryDesc(w, {groups, o / groups, i, kh, kw},
                    {w.stride(0) * (o / groups), w.stride(0), w.stride(1),
                     w.stride(2), w.stride(3)});
}

// The same dims and type, with the layout left to oneDNN: its blocked
// layouts run convolutions 1.5x (f32) to 3.5x (bf16) faster than plain NCHW
// here, which pays for reordering activations in and out.
dnnl::memory::desc Any(const dnnl::memory::desc& md) {
  return dnnl::memory::desc(Dims(md), DataType(md),
                            dnnl::memory::format_tag::any);
}

ConvGeometry Params(const MixrtConvAttrs& a) {
  // oneDNN counts dilation from 0 (PyTorch's dilation - 1).
  return {{a.stride[0], a.stride[1]},
          {a.dilation[0] - 1, a.dilation[1] - 1},
          {a.padding[0], a.padding[1]}};
}

std::string AttrKey(const MixrtConvAttrs& a) {
  return absl::StrCat(a.stride[0], ",", a.stride[1], ",", a.padding[0], ",",
                      a.padding[1], ",", a.dilation[0], ",", a.dilation[1], ",",
                      a.groups);
}

dnnl::convolution_forward::primitive_desc ForwardPd(
    const dnnl::memory::desc& src, const dnnl::memory::desc& wei,
    const dnnl::memory::desc* bias, const dnnl::memory::desc& dst,
    const MixrtConvAttrs& a, const dnnl::primitive_attr& attr = {}) {
  // The op's own activation runs after (see epilogue.h); post-ops come
  // from a fused chain (fused_conv.h).
  return ConvForwardPd(src, wei, bias, dst, Params(a), attr);
}

// A post-op's second source: [1, C, 1, 1] per channel, or [1, 1, 1, 1]
// for one element (the layouts the fusion claims).
dnnl::memory::desc OperandDesc(const TensorRef& t) {
  const bool per_channel = t.ndim() == 4 && t.dim(1) != 1 && t.stride(1) != 0;
  return dnnl::memory::desc({1, per_channel ? t.dim(1) : 1, 1, 1},
                            *OneDnnType(t.dtype()),
                            dnnl::memory::format_tag::abcd);
}

std::string StepsKey(absl::Span<const EpilogueStep> steps) {
  std::string key;
  for (const EpilogueStep& s : steps) {
    absl::StrAppend(&key, "|", static_cast<int>(s.algorithm), ",", s.alpha, ",",
                    s.beta);
    if (s.operand != nullptr) absl::StrAppend(&key, ",", DescKey(*s.operand));
  }
  return key;
}

// The forward primitive of x (*) w (+ bias) -> y with `steps` as post-ops;
// nullptr when oneDNN has none (`may_fail`).
std::shared_ptr<const CachedPrimitive> ForwardPrimitive(
    const TensorRef& x, const TensorRef& w, const TensorRef* bias,
    const TensorRef& y, const MixrtConvAttrs& a,
    absl::Span<const EpilogueStep> steps, bool may_fail) {
  const std::string key =
      absl::StrCat("conv_fwd|", DescKey(x), "|", DescKey(w), "|",
                   bias != nullptr ? DescKey(*bias) : "-", "|", DescKey(y), "|",
                   AttrKey(a), StepsKey(steps));
  const auto make = [&] {
    dnnl::post_ops ops;
    for (const EpilogueStep& s : steps) {
      if (s.operand != nullptr) {
        ops.append_binary(s.algorithm, OperandDesc(*s.operand));
      } else {
        AppendEltwise(&ops, s.algorithm, s.alpha, s.beta);
      }
    }
    dnnl::primitive_attr attr;
    attr.set_post_ops(ops);
    dnnl::memory::desc bias_md;
    if (bias != nullptr) bias_md = MemoryDesc(*bias);
    const auto pd = ForwardPd(Any(MemoryDesc(x)), Any(WeightsDesc(w, a.groups)),
                              bias != nullptr ? &bias_md : nullptr,
                              Any(MemoryDesc(y)), a, attr);
    return CachedPrimitive{dnnl::convolution_forward(pd),
                           pd.impl_info_str(),
                           {{DNNL_ARG_SRC, pd.src_desc()},
                            {DNNL_ARG_WEIGHTS, pd.weights_desc()},
                            {DNNL_ARG_DST, pd.dst_desc()}}};
  };
  return may_fail ? TryGetPrimitive(key, make) : GetPrimitive(key, make);
}

// Runs the primitive on dense-or-strided caller tensors; `packed_w` is w in
// the primitive's own layout (then w's data is not read); with `blocked_y`
// the result stays in the primitive's layout there (y only describes it).
void RunForward(const CachedPrimitive& prim, const TensorRef& x,
                const TensorRef& w, const TensorRef* bias, const TensorRef& y,
                const MixrtConvAttrs& a, absl::Span<const EpilogueStep> steps,
                const dnnl::memory* packed_w,
                const dnnl::memory* blocked_y = nullptr) {
  LayoutBinder bind(prim);
  bind.Input(DNNL_ARG_SRC, MemoryDesc(x), x.data());
  if (packed_w != nullptr) {
    bind.Input(DNNL_ARG_WEIGHTS, packed_w->get_desc(),
               packed_w->get_data_handle());
  } else {
    bind.Input(DNNL_ARG_WEIGHTS, WeightsDesc(w, a.groups), w.data());
  }
  if (bias != nullptr)
    bind.Input(DNNL_ARG_BIAS, MemoryDesc(*bias), bias->data());
  for (size_t i = 0; i < steps.size(); ++i) {
    if (steps[i].operand == nullptr) continue;
    bind.Input(
        DNNL_ARG_ATTR_MULTIPLE_POST_OP(static_cast<int>(i)) | DNNL_ARG_SRC_1,
        OperandDesc(*steps[i].operand), steps[i].operand->data());
  }
  if (blocked_y != nullptr) {
    bind.Output(DNNL_ARG_DST, blocked_y->get_desc(),
                blocked_y->get_data_handle());
  } else {
    bind.Output(DNNL_ARG_DST, MemoryDesc(y), y.data());
  }
  bind.Execute();
}

// ForwardPrimitive's, UNIMPLEMENTED when there is none and
// FAILED_PRECONDITION when it wants another layout than `packed_w`'s.
absl::StatusOr<std::shared_ptr<const CachedPrimitive>> UsableForward(
    const TensorRef& x, const TensorRef& w, const TensorRef* bias,
    const TensorRef& y, const MixrtConvAttrs& a,
    absl::Span<const EpilogueStep> steps, const dnnl::memory* packed_w) {
  auto prim = ForwardPrimitive(x, w, bias, y, a, steps, true);
  if (prim == nullptr) {
    return absl::UnimplementedError(
        "conv2d: oneDNN has no convolution with these post-ops");
  }
  if (packed_w != nullptr &&
      packed_w->get_desc() != prim->layouts.at(DNNL_ARG_WEIGHTS)) {
    return absl::FailedPreconditionError(
        "conv2d: the packed weights' layout changed");
  }
  return prim;
}

std::shared_ptr<const CachedPrimitive> MaxPoolPrimitive(
    const dnnl::memory::desc& src, const TensorRef& y,
    const MixrtPoolAttrs& p) {
  const std::string key =
      absl::StrCat("maxpool_inference|", DescIdentity(src), "|", DescKey(y),
                   "|", p.kernel[0], ",", p.kernel[1], ",", p.stride[0], ",",
                   p.stride[1], ",", p.padding[0], ",", p.padding[1]);
  return TryGetPrimitive(key, [&] {
    const auto pd = MaxPoolInferencePd(
        src, Any(MemoryDesc(y)), {p.kernel[0], p.kernel[1]},
        {p.stride[0], p.stride[1]}, {p.padding[0], p.padding[1]});
    return CachedPrimitive{
        dnnl::pooling_forward(pd),
        pd.impl_info_str(),
        {{DNNL_ARG_SRC, pd.src_desc()}, {DNNL_ARG_DST, pd.dst_desc()}}};
  });
}

absl::StatusOr<MixrtConvAttrs> Attrs(const sdk::KernelCall& call) {
  MIXRT_ASSIGN_OR_RETURN(auto attrs, call.GetAttrs<MixrtConvAttrs>());
  const MixrtConvAttrs a = *attrs;
  if (a.groups < 1 || a.stride[0] < 1 || a.stride[1] < 1 || a.dilation[0] < 1 ||
      a.dilation[1] < 1 || a.padding[0] < 0 || a.padding[1] < 0) {
    return absl::InvalidArgumentError("conv2d: invalid stride/padding/groups");
  }
  for (const TensorRef& t : call.inputs) {
    if (t.ndim() != 4 && t.ndim() != 1) {
      return absl::InvalidArgumentError("conv2d takes 4-d NCHW tensors");
    }
  }
  return a;
}

absl::Status Forward(const sdk::KernelCall& call, const MixrtConvAttrs& a) {
  const bool widen = !OneDnnHasMatmul(call.inputs[0].dtype());
  Operand x(call.inputs[0], widen, true), w(call.inputs[1], widen, true);
  Operand y(call.outputs[0], widen, false);
  std::unique_ptr<Operand> bias;
  if (call.inputs.size() == 3)
    bias = std::make_unique<Operand>(call.inputs[2], widen, true);
  const TensorRef* bias_ref = bias != nullptr ? &bias->ref : nullptr;
  auto prim = ForwardPrimitive(x.ref, w.ref, bias_ref, y.ref, a, {}, false);
  RunForward(*prim, x.ref, w.ref, bias_ref, y.ref, a, {}, nullptr);
  ActivateInPlace(y.ref, static_cast<MixrtActivation>(a.activation));
  y.StoreInto(call.outputs[0]);
  return absl::OkStatus();
}

absl::Status BackwardData(const sdk::KernelCall& call,
                          const MixrtConvAttrs& a) {
  const bool widen = !OneDnnHasMatmul(call.inputs[0].dtype());
  Operand gy(call.inputs[0], widen, true), w(call.inputs[1], widen, true);
  Operand gx(call.outputs[0], widen, false);
  const dnnl::memory::desc diff_dst = MemoryDesc(gy.ref);
  const dnnl::memory::desc wei = WeightsDesc(w.ref, a.groups);
  const dnnl::memory::desc diff_src = MemoryDesc(gx.ref);
  const ConvGeometry p = Params(a);
  const std::string key =
      absl::StrCat("conv_bwd_data|", DescKey(gy.ref), "|", DescKey(w.ref), "|",
                   DescKey(gx.ref), "|", AttrKey(a));
  auto prim = GetPrimitive(key, [&] {
    const auto hint =
        ForwardPd(Any(diff_src), Any(wei), nullptr, Any(diff_dst), a);
    const dnnl::convolution_backward_data::primitive_desc pd =
        ConvBackwardDataPd(Any(diff_src), Any(wei), Any(diff_dst), p, hint);
    return CachedPrimitive{dnnl::convolution_backward_data(pd),
                           pd.impl_info_str(),
                           {{DNNL_ARG_DIFF_DST, pd.diff_dst_desc()},
                            {DNNL_ARG_WEIGHTS, pd.weights_desc()},
                            {DNNL_ARG_DIFF_SRC, pd.diff_src_desc()}}};
  });
  LayoutBinder bind(*prim);
  bind.Input(DNNL_ARG_DIFF_DST, diff_dst, gy.ref.data());
  bind.Input(DNNL_ARG_WEIGHTS, wei, w.ref.data());
  bind.Output(DNNL_ARG_DIFF_SRC, diff_src, gx.ref.data());
  bind.Execute();
  gx.StoreInto(call.outputs[0]);
  return absl::OkStatus();
}

absl::Status BackwardWeights(const sdk::KernelCall& call,
                             const MixrtConvAttrs& a) {
  const bool widen = !OneDnnHasMatmul(call.inputs[0].dtype());
  Operand gy(call.inputs[0], widen, true), x(call.inputs[1], widen, true);
  Operand gw(call.outputs[0], widen, false);
  const bool has_bias = call.outputs.size() == 2;
  std::unique_ptr<Operand> gb;
  if (has_bias) gb = std::make_unique<Operand>(call.outputs[1], widen, false);
  const dnnl::memory::desc diff_dst = MemoryDesc(gy.ref);
  const dnnl::memory::desc src = MemoryDesc(x.ref);
  const dnnl::memory::desc diff_wei = WeightsDesc(gw.ref, a.groups);
  dnnl::memory::desc diff_bias;
  if (has_bias) diff_bias = MemoryDesc(gb->ref);
  const ConvGeometry p = Params(a);
  const std::string key = absl::StrCat(
      "conv_bwd_wei|", DescKey(gy.ref), "|", DescKey(x.ref), "|",
      DescKey(gw.ref), "|", has_bias ? DescKey(gb->ref) : "-", "|", AttrKey(a));
  auto prim = GetPrimitive(key, [&] {
    const auto hint =
        ForwardPd(Any(src), Any(diff_wei), has_bias ? &diff_bias : nullptr,
                  Any(diff_dst), a);
    const dnnl::convolution_backward_weights::primitive_desc pd =
        ConvBackwardWeightsPd(Any(src), Any(diff_wei),
                              has_bias ? &diff_bias : nullptr, Any(diff_dst), p,
                              hint);
    return CachedPrimitive{dnnl::convolution_backward_weights(pd),
                           pd.impl_info_str(),
                           {{DNNL_ARG_DIFF_DST, pd.diff_dst_desc()},
                            {DNNL_ARG_SRC, pd.src_desc()},
                            {DNNL_ARG_DIFF_WEIGHTS, pd.diff_weights_desc()}}};
  });
  LayoutBinder bind(*prim);
  bind.Input(DNNL_ARG_DIFF_DST, diff_dst, gy.ref.data());
  bind.Input(DNNL_ARG_SRC, src, x.ref.data());
  bind.Output(DNNL_ARG_DIFF_WEIGHTS, diff_wei, gw.ref.data());
  if (has_bias) bind.Output(DNNL_ARG_DIFF_BIAS, diff_bias, gb->ref.data());
  bind.Execute();
  gw.StoreInto(call.outputs[0]);
  if (has_bias) gb->StoreInto(call.outputs[1]);
  return absl::OkStatus();
}

}  // namespace

absl::Status RunConvWithEpilogue(const TensorRef& x, const TensorRef& w,
                                 const TensorRef* bias, const TensorRef& y,
                                 const MixrtConvAttrs& a,
                                 absl::Span<const EpilogueStep> steps,
                                 const dnnl::memory* packed_w) {
  MIXRT_ASSIGN_OR_RETURN(auto prim,
                         UsableForward(x, w, bias, y, a, steps, packed_w));
  RunForward(*prim, x, w, bias, y, a, steps, packed_w);
  return absl::OkStatus();
}

std::string ConvWithEpilogueImplementation(
    const TensorRef& x, const TensorRef& w, const TensorRef* bias,
    const TensorRef& y, const MixrtConvAttrs& a,
    absl::Span<const EpilogueStep> steps) {
  auto prim = ForwardPrimitive(x, w, bias, y, a, steps, true);
  return prim == nullptr ? "" : prim->implementation;
}

absl::Status RunConvMaxPoolWithEpilogue(
    const TensorRef& x, const TensorRef& w, const TensorRef* bias,
    const TensorRef& conv_out, const TensorRef& y, const MixrtConvAttrs& a,
    absl::Span<const EpilogueStep> steps, const MixrtPoolAttrs& pool,
    dnnl::memory* between, const dnnl::memory* packed_w) {
  MIXRT_ASSIGN_OR_RETURN(
      auto conv, UsableForward(x, w, bias, conv_out, a, steps, packed_w));
  const dnnl::memory::desc& blocked = conv->layouts.at(DNNL_ARG_DST);
  auto max_pool = MaxPoolPrimitive(blocked, y, pool);
  if (max_pool == nullptr)
    return absl::UnimplementedError("oneDNN has no such max pooling");
  if (!*between || between->get_desc() != blocked)
    *between = dnnl::memory(blocked, Engine());
  RunForward(*conv, x, w, bias, conv_out, a, steps, packed_w, between);
  LayoutBinder bind(*max_pool);
  bind.Input(DNNL_ARG_SRC, blocked, between->get_data_handle());
  bind.Output(DNNL_ARG_DST, MemoryDesc(y), y.data());
  bind.Execute();
  return absl::OkStatus();
}

std::string ConvMaxPoolImplementation(
    const TensorRef& x, const TensorRef& w, const TensorRef* bias,
    const TensorRef& conv_out, const TensorRef& y, const MixrtConvAttrs& a,
    absl::Span<const EpilogueStep> steps, const MixrtPoolAttrs& pool) {
  auto conv = ForwardPrimitive(x, w, bias, conv_out, a, steps, true);
  if (conv == nullptr) return "";
  auto max_pool = MaxPoolPrimitive(conv->layouts.at(DNNL_ARG_DST), y, pool);
  if (max_pool == nullptr || !Optimized(max_pool->implementation)) return "";
  return absl::StrCat(conv->implementation, "; max pool ",
                      max_pool->implementation);
}

absl::Status PackConvWeights(const TensorRef& x, const TensorRef& w,
                             const TensorRef* bias, const TensorRef& y,
                             const MixrtConvAttrs& a,
                             absl::Span<const EpilogueStep> steps,
                             dnnl::memory* packed) {
  MIXRT_ASSIGN_OR_RETURN(auto prim,
                         UsableForward(x, w, bias, y, a, steps, nullptr));
  const dnnl::memory::desc& want = prim->layouts.at(DNNL_ARG_WEIGHTS);
  if (!*packed || packed->get_desc() != want)
    *packed = dnnl::memory(want, Engine());
  Reorder(Memory(WeightsDesc(w, a.groups), w.data()), *packed);
  ThreadStream().wait();
  return absl::OkStatus();
}

namespace {

absl::Status WrongTensorCount(const sdk::KernelCall& call) {
  return absl::InvalidArgumentError(
      absl::StrCat("conv op ", call.op, ": wrong number of tensors"));
}

}  // namespace

absl::Status RunConv2d(const sdk::KernelCall& call) {
  MIXRT_ASSIGN_OR_RETURN(auto attrs, Attrs(call));
  const size_t nin = call.inputs.size(), nout = call.outputs.size();
  if (nin < 2 || nin > 3 || nout != 1) return WrongTensorCount(call);
  return Forward(call, attrs);
}

absl::Status RunConv2dBackwardData(const sdk::KernelCall& call) {
  MIXRT_ASSIGN_OR_RETURN(auto attrs, Attrs(call));
  if (call.inputs.size() != 2 || call.outputs.size() != 1) {
    return WrongTensorCount(call);
  }
  return BackwardData(call, attrs);
}

absl::Status RunConv2dBackwardWeights(const sdk::KernelCall& call) {
  MIXRT_ASSIGN_OR_RETURN(auto attrs, Attrs(call));
  const size_t nout = call.outputs.size();
  if (call.inputs.size() != 2 || nout < 1 || nout > 2) {
    return WrongTensorCount(call);
  }
  return BackwardWeights(call, attrs);
}

}  // namespace mixrt::cpu
