#include "core/kernels/layer_norm.h"

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "core/kernels/op_checks.h"
#include "core/tensor/factories.h"
#include "core/tensor/kernel_launch.h"
#include "mixrt/status_macros.h"

namespace mixrt::kernels {
namespace {

// Rows and row length of x for `normalized_dims` trailing dims.
absl::StatusOr<std::pair<int64_t, int64_t>> RowsAndCols(const Tensor& x,
                                                        int normalized_dims) {
  if (normalized_dims < 1 || normalized_dims > x.ndim()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "layer_norm: normalized_dims ", normalized_dims, " must be in [1, ",
        x.ndim(), "] for input ", ShapeToString(x.shape())));
  }
  int64_t cols = 1;
  for (int d = x.ndim() - normalized_dims; d < x.ndim(); ++d) {
    cols *= x.shape()[d];
  }
  return std::make_pair(cols == 0 ? 0 : x.numel() / cols, cols);
}

absl::Status CheckAffine(const Tensor& x, int normalized_dims,
                         const Tensor& param, absl::string_view what) {
  if (!param.defined()) return absl::OkStatus();
  MIXRT_RETURN_IF_ERROR(CheckFloating(param, "layer_norm"));
  MIXRT_RETURN_IF_ERROR(CheckSameDevice(x, param, "layer_norm"));
  const absl::Span<const int64_t> want(
      x.shape().data() + x.ndim() - normalized_dims, normalized_dims);
  if (absl::Span<const int64_t>(param.shape()) != want) {
    return absl::InvalidArgumentError(absl::StrCat(
        "layer_norm: ", what, " has shape ", ShapeToString(param.shape()),
        ", expected the normalized shape ", ShapeToString(want)));
  }
  return absl::OkStatus();
}

MixrtNormAttrs Attrs(double eps) {
  MixrtNormAttrs attrs{};
  attrs.struct_size = sizeof(attrs);
  attrs.eps = eps;
  return attrs;
}

}  // namespace

absl::StatusOr<LayerNormOutput> layer_norm(const Tensor& x, int normalized_dims,
                                           const Tensor& weight,
                                           const Tensor& bias, double eps) {
  MIXRT_RETURN_IF_ERROR(CheckFloating(x, "layer_norm"));
  if (weight.defined() != bias.defined()) {
    return absl::InvalidArgumentError(
        "layer_norm: give both weight and bias, or neither");
  }
  MIXRT_RETURN_IF_ERROR(CheckAffine(x, normalized_dims, weight, "weight"));
  MIXRT_RETURN_IF_ERROR(CheckAffine(x, normalized_dims, bias, "bias"));
  MIXRT_ASSIGN_OR_RETURN(auto rc, RowsAndCols(x, normalized_dims));
  const auto [rows, cols] = rc;
  MIXRT_ASSIGN_OR_RETURN(Tensor x2, x.reshape({rows, cols}));
  LayerNormOutput out;
  MIXRT_ASSIGN_OR_RETURN(Tensor y2, empty({rows, cols}, x.dtype(), x.device()));
  MIXRT_ASSIGN_OR_RETURN(out.mean, empty({rows}, DType::kF32, x.device()));
  MIXRT_ASSIGN_OR_RETURN(out.rstd, empty({rows}, DType::kF32, x.device()));
  std::vector<Tensor> ins = {x2};
  if (weight.defined()) {
    MIXRT_ASSIGN_OR_RETURN(Tensor w, weight.reshape({cols}));
    MIXRT_ASSIGN_OR_RETURN(Tensor b, bias.reshape({cols}));
    MIXRT_ASSIGN_OR_RETURN(w, w.to(x.dtype()));
    MIXRT_ASSIGN_OR_RETURN(b, b.to(x.dtype()));
    ins.push_back(w);
    ins.push_back(b);
  }
  if (rows > 0 && cols > 0) {
    const MixrtNormAttrs attrs = Attrs(eps);
    const Tensor outs[] = {y2, out.mean, out.rstd};
    MIXRT_RETURN_IF_ERROR(LaunchKernel(MIXRT_OP_LAYER_NORM, ins, outs, &attrs));
  }
  MIXRT_ASSIGN_OR_RETURN(out.y, y2.view(x.shape()));
  return out;
}

absl::StatusOr<LayerNormGrads> layer_norm_backward(
    const Tensor& grad_y, const Tensor& x, const LayerNormOutput& forward,
    int normalized_dims, const Tensor& weight, double eps) {
  MIXRT_RETURN_IF_ERROR(CheckFloating(x, "layer_norm_backward"));
  MIXRT_RETURN_IF_ERROR(CheckFloating(grad_y, "layer_norm_backward"));
  if (grad_y.shape() != x.shape()) {
    return absl::InvalidArgumentError(
        "layer_norm_backward: grad_y and x shapes differ");
  }
  MIXRT_RETURN_IF_ERROR(CheckAffine(x, normalized_dims, weight, "weight"));
  MIXRT_ASSIGN_OR_RETURN(auto rc, RowsAndCols(x, normalized_dims));
  const auto [rows, cols] = rc;
  MIXRT_ASSIGN_OR_RETURN(Tensor x2, x.reshape({rows, cols}));
  MIXRT_ASSIGN_OR_RETURN(Tensor g2, grad_y.to(x.dtype()));
  MIXRT_ASSIGN_OR_RETURN(g2, g2.reshape({rows, cols}));
  LayerNormGrads grads;
  MIXRT_ASSIGN_OR_RETURN(Tensor gx, empty({rows, cols}, x.dtype(), x.device()));
  std::vector<Tensor> ins = {g2, x2, forward.mean, forward.rstd};
  std::vector<Tensor> outs = {gx};
  if (weight.defined()) {
    MIXRT_ASSIGN_OR_RETURN(Tensor w, weight.reshape({cols}));
    MIXRT_ASSIGN_OR_RETURN(w, w.to(x.dtype()));
    ins.push_back(w);
    // The kernel writes every element; with no rows it does not run and
    // the sums over no rows are 0. (A fill before the launch would also
    // give the parameter gradients two writers, which the compiler does not
    // offer a plugin for fusion.)
    for (Tensor* g : {&grads.grad_weight, &grads.grad_bias}) {
      MIXRT_ASSIGN_OR_RETURN(
          *g, rows > 0 ? empty({cols}, weight.dtype(), x.device())
                       : zeros({cols}, weight.dtype(), x.device()));
    }
    outs.push_back(grads.grad_weight);
    outs.push_back(grads.grad_bias);
  }
  if (rows > 0 && cols > 0) {
    const MixrtNormAttrs attrs = Attrs(eps);
    MIXRT_RETURN_IF_ERROR(
        LaunchKernel(MIXRT_OP_LAYER_NORM_BACKWARD, ins, outs, &attrs));
  }
  MIXRT_ASSIGN_OR_RETURN(grads.grad_x, gx.view(x.shape()));
  if (weight.defined()) {
    MIXRT_ASSIGN_OR_RETURN(grads.grad_weight,
                           grads.grad_weight.view(weight.shape()));
    MIXRT_ASSIGN_OR_RETURN(grads.grad_bias,
                           grads.grad_bias.view(weight.shape()));
  }
  return grads;
}

}  // namespace mixrt::kernels
