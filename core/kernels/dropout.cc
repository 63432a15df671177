#include "core/kernels/dropout.h"

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "core/kernels/op_checks.h"
#include "core/kernels/pointwise.h"
#include "core/tensor/factories.h"
#include "core/tensor/kernel_launch.h"
#include "mixrt/status_macros.h"

namespace mixrt::kernels {
namespace {

MixrtDropoutAttrs Attrs(const DropoutState& state) {
  MixrtDropoutAttrs a{};
  a.struct_size = sizeof(a);
  a.p = state.p;
  a.seed = state.seed;
  a.offset = state.offset;
  return a;
}

// The fused op over x (forward) or grad_y (backward); UNIMPLEMENTED from a
// plugin without it.
absl::StatusOr<Tensor> Fused(const Tensor& x, const DropoutState& state) {
  if (x.device().backend()->identity().abi_minor < 1) {
    return absl::UnimplementedError("dropout: the plugin implements ABI 1.0");
  }
  MIXRT_ASSIGN_OR_RETURN(Tensor y, empty(x.shape(), x.dtype(), x.device()));
  const MixrtDropoutAttrs attrs = Attrs(state);
  const Tensor ins[] = {x};
  const Tensor outs[] = {y};
  MIXRT_RETURN_IF_ERROR(LaunchKernel(MIXRT_OP_DROPOUT, ins, outs, &attrs));
  return y;
}

// The same mask from the ops every plugin has: U in f32 compared with p in
// f32 (the fused op's rule), scaled in x's dtype.
absl::StatusOr<Tensor> ComposedScale(const Tensor& x,
                                     const DropoutState& state) {
  MIXRT_ASSIGN_OR_RETURN(Tensor u, rand_at(x.shape(), DType::kF32, x.device(),
                                           state.seed, state.offset));
  MIXRT_ASSIGN_OR_RETURN(Tensor threshold,
                         full({}, state.p, DType::kF32, x.device()));
  MIXRT_ASSIGN_OR_RETURN(Tensor keep, ge(u, threshold));
  MIXRT_ASSIGN_OR_RETURN(
      Tensor kept, full({}, 1.0 / (1.0 - state.p), x.dtype(), x.device()));
  MIXRT_ASSIGN_OR_RETURN(Tensor dropped, zeros({}, x.dtype(), x.device()));
  return where(keep, kept, dropped);
}

}  // namespace

absl::StatusOr<DropoutOutput> dropout(const Tensor& x, double p,
                                      Generator* generator) {
  MIXRT_RETURN_IF_ERROR(CheckFloating(x, "dropout"));
  if (!(p >= 0 && p <= 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("dropout: p must be in [0, 1], got ", p));
  }
  DropoutOutput out;
  out.state.p = p;
  if (p == 1) {
    // As PyTorch: x * 0 (NaN and inf become NaN, negatives -0), gradients
    // 0, and no random numbers drawn.
    MIXRT_ASSIGN_OR_RETURN(out.state.scale, zeros({}, x.dtype(), x.device()));
    MIXRT_ASSIGN_OR_RETURN(out.y, mul(x, out.state.scale));
    return out;
  }
  Generator& gen = generator != nullptr ? *generator : DefaultGenerator();
  const Draw draw = ReserveBlocks(gen.state(), PhiloxBlocks(x.numel()));
  out.state.seed = draw.seed;
  out.state.offset = draw.offset;
  absl::StatusOr<Tensor> fused = Fused(x, out.state);
  if (fused.ok() || !absl::IsUnimplemented(fused.status())) {
    MIXRT_ASSIGN_OR_RETURN(out.y, std::move(fused));
    return out;
  }
  MIXRT_ASSIGN_OR_RETURN(out.state.scale, ComposedScale(x, out.state));
  MIXRT_ASSIGN_OR_RETURN(out.y, mul(x, out.state.scale));
  return out;
}

absl::StatusOr<Tensor> dropout_backward(const Tensor& grad_y,
                                        const DropoutState& state) {
  MIXRT_RETURN_IF_ERROR(CheckFloating(grad_y, "dropout_backward"));
  if (state.scale.defined()) return mul(grad_y, state.scale);
  return Fused(grad_y, state);
}

}  // namespace mixrt::kernels
