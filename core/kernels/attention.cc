#include "core/kernels/attention.h"

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "core/kernels/op_checks.h"
#include "core/tensor/kernel_launch.h"
#include "mixrt/status_macros.h"

namespace mixrt::kernels {
namespace {

// The leading dims flattened: [..., R, C] -> [G, R, C], contiguous.
absl::StatusOr<Tensor> Grouped(const Tensor& t) {
  MIXRT_ASSIGN_OR_RETURN(Tensor c, t.contiguous());
  const int n = c.ndim();
  return c.reshape({-1, c.shape()[n - 2], c.shape()[n - 1]});
}

// The mask as a [G, L, S] view of its own storage when its broadcast over
// the leading dims allows one (a [L, S] or [G..., L, S] mask), else a
// materialized copy ([B, 1, L, S] with several heads).
absl::StatusOr<Tensor> GroupedMask(const Tensor& mask, const Tensor& q,
                                   const Tensor& k, DType q_dtype) {
  const int n = q.ndim();
  std::vector<int64_t> shape(q.shape().begin(), q.shape().end() - 2);
  shape.push_back(q.shape()[n - 2]);
  shape.push_back(k.shape()[n - 2]);
  Tensor m = mask;
  if (IsFloating(m.dtype()) && m.dtype() != q_dtype &&
      m.dtype() != DType::kF32) {
    MIXRT_ASSIGN_OR_RETURN(m, m.to(DType::kF32));
  }
  MIXRT_ASSIGN_OR_RETURN(Tensor expanded, m.expand(shape));
  const std::vector<int64_t> grouped = {-1, shape[n - 2], shape[n - 1]};
  absl::StatusOr<Tensor> view = expanded.view(grouped);
  if (view.ok()) return view;
  MIXRT_ASSIGN_OR_RETURN(Tensor dense, expanded.contiguous());
  return dense.view(grouped);
}

MixrtAttentionAttrs Attrs(const FusedAttentionArgs& args) {
  MixrtAttentionAttrs a{};
  a.struct_size = sizeof(a);
  a.scale = args.scale;
  a.dropout_p = args.dropout_p;
  a.seed = args.seed;
  a.offset = args.offset;
  a.is_causal = args.is_causal ? 1 : 0;
  a.mask_kind = !args.mask.defined() ? MIXRT_ATTENTION_MASK_NONE
                : args.mask.dtype() == DType::kBool
                    ? MIXRT_ATTENTION_MASK_BOOL
                    : MIXRT_ATTENTION_MASK_ADDITIVE;
  return a;
}

absl::Status CheckPlugin(const Tensor& q) {
  if (q.device().backend()->identity().abi_minor < 1) {
    return absl::UnimplementedError(
        "scaled_dot_product_attention: the plugin implements ABI 1.0");
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<FusedAttentionOutput> scaled_dot_product_attention(
    const Tensor& q, const Tensor& k, const Tensor& v,
    const FusedAttentionArgs& args) {
  constexpr absl::string_view kOp = "scaled_dot_product_attention";
  for (const Tensor* t : {&q, &k, &v}) {
    MIXRT_RETURN_IF_ERROR(CheckFloating(*t, kOp));
  }
  MIXRT_RETURN_IF_ERROR(CheckPlugin(q));
  if (k.dtype() != q.dtype() || v.dtype() != q.dtype()) {
    return absl::InvalidArgumentError(
        absl::StrCat(kOp, ": q, k and v are ", DTypeName(q.dtype()), ", ",
                     DTypeName(k.dtype()), " and ", DTypeName(v.dtype()),
                     "; they must share a dtype"));
  }
  MIXRT_ASSIGN_OR_RETURN(Tensor q3, Grouped(q));
  MIXRT_ASSIGN_OR_RETURN(Tensor k3, Grouped(k));
  MIXRT_ASSIGN_OR_RETURN(Tensor v3, Grouped(v));
  std::vector<Tensor> ins = {q3, k3, v3};
  FusedAttentionOutput result;
  if (args.mask.defined()) {
    MIXRT_ASSIGN_OR_RETURN(result.grouped_mask,
                           GroupedMask(args.mask, q, k, q.dtype()));
    ins.push_back(result.grouped_mask);
  }
  MIXRT_ASSIGN_OR_RETURN(Tensor out3,
                         empty({q3.shape()[0], q3.shape()[1], v3.shape()[2]},
                               q.dtype(), q.device()));
  MIXRT_ASSIGN_OR_RETURN(result.lse, empty({q3.shape()[0], q3.shape()[1]},
                                           DType::kF32, q.device()));
  const MixrtAttentionAttrs attrs = Attrs(args);
  const Tensor outs[] = {out3, result.lse};
  MIXRT_RETURN_IF_ERROR(
      LaunchKernel(MIXRT_OP_SCALED_DOT_PRODUCT_ATTENTION, ins, outs, &attrs));
  std::vector<int64_t> shape(q.shape().begin(), q.shape().end() - 1);
  shape.push_back(v.shape()[v.ndim() - 1]);
  MIXRT_ASSIGN_OR_RETURN(result.out, out3.reshape(shape));
  return result;
}

absl::StatusOr<std::vector<Tensor>> scaled_dot_product_attention_backward(
    const Tensor& grad_out, const Tensor& q, const Tensor& k, const Tensor& v,
    const FusedAttentionOutput& forward, const FusedAttentionArgs& args) {
  MIXRT_RETURN_IF_ERROR(CheckPlugin(q));
  MIXRT_ASSIGN_OR_RETURN(Tensor g, grad_out.to(q.dtype()));
  MIXRT_ASSIGN_OR_RETURN(Tensor g3, Grouped(g));
  MIXRT_ASSIGN_OR_RETURN(Tensor q3, Grouped(q));
  MIXRT_ASSIGN_OR_RETURN(Tensor k3, Grouped(k));
  MIXRT_ASSIGN_OR_RETURN(Tensor v3, Grouped(v));
  MIXRT_ASSIGN_OR_RETURN(Tensor o3, Grouped(forward.out));
  std::vector<Tensor> ins = {g3, q3, k3, v3, o3, forward.lse};
  if (args.mask.defined()) {
    Tensor m = forward.grouped_mask;
    if (!m.defined()) {  // A forward output built elsewhere (conformance).
      MIXRT_ASSIGN_OR_RETURN(m, GroupedMask(args.mask, q, k, q.dtype()));
    }
    ins.push_back(m);
  }
  std::vector<Tensor> grads;
  for (const Tensor* t : {&q3, &k3, &v3}) {
    MIXRT_ASSIGN_OR_RETURN(Tensor d,
                           empty(t->shape(), t->dtype(), t->device()));
    grads.push_back(std::move(d));
  }
  const MixrtAttentionAttrs attrs = Attrs(args);
  MIXRT_RETURN_IF_ERROR(LaunchKernel(
      MIXRT_OP_SCALED_DOT_PRODUCT_ATTENTION_BACKWARD, ins, grads, &attrs));
  MIXRT_ASSIGN_OR_RETURN(grads[0], grads[0].reshape(q.shape()));
  MIXRT_ASSIGN_OR_RETURN(grads[1], grads[1].reshape(k.shape()));
  MIXRT_ASSIGN_OR_RETURN(grads[2], grads[2].reshape(v.shape()));
  return grads;
}

}  // namespace mixrt::kernels
