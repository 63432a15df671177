// Differentiable casts, shape ops, pointwise ops and reductions.
#include <algorithm>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "core/amp/autocast/autocast.h"
#include "core/autograd/function_node.h"
#include "core/functional/ops.h"
#include "core/kernels/pointwise.h"
#include "core/kernels/reduce.h"
#include "mixrt/status_macros.h"

namespace mixrt {
namespace {

using Grads = absl::StatusOr<std::vector<Tensor>>;

// d/d input for an input of `shape` and `dtype` from a broadcast grad.
absl::StatusOr<Tensor> GradAs(const Tensor& g, const Shape& shape,
                              DType dtype) {
  MIXRT_ASSIGN_OR_RETURN(Tensor r, SumToShape(g, shape));
  return r.to(dtype);
}

absl::StatusOr<Tensor> GradLike(const Tensor& g, const Tensor& like) {
  return GradAs(g, like.shape(), like.dtype());
}

absl::StatusOr<Tensor> Unary(MixrtUnaryKind kind, const char* name,
                             const Tensor& x_in, double alpha = 0,
                             double beta = 0) {
  MIXRT_ASSIGN_OR_RETURN(
      std::vector<Tensor> in,
      AutocastInputs(name, MIXRT_OP_CLASS_ELEMENTWISE, {x_in}));
  const Tensor& x = in[0];
  MIXRT_ASSIGN_OR_RETURN(Tensor y, kernels::unary(kind, x, alpha, beta));
  Record(name, {x}, {&y}, {x},
         [kind, alpha, beta](const std::vector<Tensor>& g,
                             const std::vector<Tensor>& saved) -> Grads {
           MIXRT_ASSIGN_OR_RETURN(
               Tensor dx,
               kernels::unary_backward(kind, g[0], saved[0], alpha, beta));
           return std::vector<Tensor>{dx};
         });
  return y;
}

}  // namespace

absl::StatusOr<Tensor> SumToShape(const Tensor& grad,
                                  absl::Span<const int64_t> shape) {
  if (absl::Span<const int64_t>(grad.shape()) == shape) return grad;
  const int lead = grad.ndim() - static_cast<int>(shape.size());
  if (lead < 0) {
    return absl::InternalError(
        absl::StrCat("SumToShape: gradient ", ShapeToString(grad.shape()),
                     " has fewer dims than ", ShapeToString(shape)));
  }
  std::vector<int64_t> dims;
  for (int d = 0; d < grad.ndim(); ++d) {
    if (d < lead || (shape[d - lead] == 1 && grad.shape()[d] != 1)) {
      dims.push_back(d);
    }
  }
  Tensor r = grad;
  if (!dims.empty()) {
    MIXRT_ASSIGN_OR_RETURN(r, kernels::sum(grad, dims, /*keepdim=*/true));
  }
  return r.reshape(shape);
}

absl::StatusOr<Tensor> reshape(const Tensor& x,
                               absl::Span<const int64_t> shape) {
  MIXRT_ASSIGN_OR_RETURN(Tensor y, x.reshape(shape));
  y = Tensor(y.storage(), y.dtype(), y.shape(), y.strides(), y.offset());
  const Shape in_shape = x.shape();
  Record("ReshapeBackward", {x}, {&y}, {},
         [in_shape](const std::vector<Tensor>& g,
                    const std::vector<Tensor>&) -> Grads {
           MIXRT_ASSIGN_OR_RETURN(Tensor dx, g[0].reshape(in_shape));
           return std::vector<Tensor>{dx};
         });
  return y;
}

absl::StatusOr<Tensor> transpose(const Tensor& x, int64_t dim0, int64_t dim1) {
  MIXRT_ASSIGN_OR_RETURN(Tensor y, x.transpose(dim0, dim1));
  Record("TransposeBackward", {x}, {&y}, {},
         [dim0, dim1](const std::vector<Tensor>& g,
                      const std::vector<Tensor>&) -> Grads {
           MIXRT_ASSIGN_OR_RETURN(Tensor dx, g[0].transpose(dim0, dim1));
           return std::vector<Tensor>{dx};
         });
  return y;
}

absl::StatusOr<Tensor> flatten(const Tensor& x) {
  if (x.ndim() < 1) return reshape(x, {1});
  return reshape(x, {x.shape()[0], -1});
}

absl::StatusOr<Tensor> add(const Tensor& a, const Tensor& b) {
  MIXRT_ASSIGN_OR_RETURN(Tensor y, kernels::add(a, b));
  // Only shapes and dtypes are needed: activations are not kept alive.
  const Shape sa = a.shape(), sb = b.shape();
  const DType ta = a.dtype(), tb = b.dtype();
  Record(
      "AddBackward", {a, b}, {&y}, {},
      [=](const std::vector<Tensor>& g, const std::vector<Tensor>&) -> Grads {
        MIXRT_ASSIGN_OR_RETURN(Tensor da, GradAs(g[0], sa, ta));
        MIXRT_ASSIGN_OR_RETURN(Tensor db, GradAs(g[0], sb, tb));
        return std::vector<Tensor>{da, db};
      });
  return y;
}

absl::StatusOr<Tensor> sub(const Tensor& a, const Tensor& b) {
  MIXRT_ASSIGN_OR_RETURN(Tensor y, kernels::sub(a, b));
  const Shape sa = a.shape(), sb = b.shape();
  const DType ta = a.dtype(), tb = b.dtype();
  RecordMasked("SubBackward", {a, b}, {&y}, {},
               [=](const std::vector<Tensor>& g, const std::vector<Tensor>&,
                   const InputGradMask& needs) -> Grads {
                 Tensor da, db;
                 if (needs[0]) {
                   MIXRT_ASSIGN_OR_RETURN(da, GradAs(g[0], sa, ta));
                 }
                 if (needs[1]) {
                   MIXRT_ASSIGN_OR_RETURN(Tensor ng, kernels::neg(g[0]));
                   MIXRT_ASSIGN_OR_RETURN(db, GradAs(ng, sb, tb));
                 }
                 return std::vector<Tensor>{da, db};
               });
  return y;
}

absl::StatusOr<Tensor> mul(const Tensor& a, const Tensor& b) {
  MIXRT_ASSIGN_OR_RETURN(Tensor y, kernels::mul(a, b));
  RecordMasked("MulBackward", {a, b}, {&y}, {a, b},
               [](const std::vector<Tensor>& g, const std::vector<Tensor>& s,
                  const InputGradMask& needs) -> Grads {
                 Tensor da, db;
                 if (needs[0]) {
                   MIXRT_ASSIGN_OR_RETURN(Tensor gb, kernels::mul(g[0], s[1]));
                   MIXRT_ASSIGN_OR_RETURN(da, GradLike(gb, s[0]));
                 }
                 if (needs[1]) {
                   MIXRT_ASSIGN_OR_RETURN(Tensor ga, kernels::mul(g[0], s[0]));
                   MIXRT_ASSIGN_OR_RETURN(db, GradLike(ga, s[1]));
                 }
                 return std::vector<Tensor>{da, db};
               });
  return y;
}

absl::StatusOr<Tensor> div(const Tensor& a, const Tensor& b) {
  MIXRT_ASSIGN_OR_RETURN(Tensor y, kernels::div(a, b));
  RecordMasked("DivBackward", {a, b}, {&y}, {a, b, y},
               [](const std::vector<Tensor>& g, const std::vector<Tensor>& s,
                  const InputGradMask& needs) -> Grads {
                 // d(a/b)/da = 1/b; d(a/b)/db = -(a/b)/b.
                 Tensor da, db;
                 if (needs[0]) {
                   MIXRT_ASSIGN_OR_RETURN(Tensor ga, kernels::div(g[0], s[1]));
                   MIXRT_ASSIGN_OR_RETURN(da, GradLike(ga, s[0]));
                 }
                 if (needs[1]) {
                   MIXRT_ASSIGN_OR_RETURN(Tensor q, kernels::div(s[2], s[1]));
                   MIXRT_ASSIGN_OR_RETURN(Tensor gb, kernels::mul(g[0], q));
                   MIXRT_ASSIGN_OR_RETURN(gb, kernels::neg(gb));
                   MIXRT_ASSIGN_OR_RETURN(db, GradLike(gb, s[1]));
                 }
                 return std::vector<Tensor>{da, db};
               });
  return y;
}

absl::StatusOr<Tensor> neg(const Tensor& x) {
  return Unary(MIXRT_UNARY_NEG, "neg", x);
}
absl::StatusOr<Tensor> scale(const Tensor& x, double alpha, double beta) {
  return Unary(MIXRT_UNARY_SCALE, "scale", x, alpha, beta);
}
absl::StatusOr<Tensor> relu(const Tensor& x) {
  return Unary(MIXRT_UNARY_RELU, "relu", x);
}
absl::StatusOr<Tensor> leaky_relu(const Tensor& x, double negative_slope) {
  return Unary(MIXRT_UNARY_LEAKY_RELU, "leaky_relu", x, negative_slope);
}
absl::StatusOr<Tensor> gelu(const Tensor& x, bool tanh_approximation) {
  return tanh_approximation ? Unary(MIXRT_UNARY_GELU_TANH, "gelu", x)
                            : Unary(MIXRT_UNARY_GELU, "gelu", x);
}
absl::StatusOr<Tensor> silu(const Tensor& x) {
  return Unary(MIXRT_UNARY_SILU, "silu", x);
}
absl::StatusOr<Tensor> sigmoid(const Tensor& x) {
  return Unary(MIXRT_UNARY_SIGMOID, "sigmoid", x);
}
absl::StatusOr<Tensor> tanh(const Tensor& x) {
  return Unary(MIXRT_UNARY_TANH, "tanh", x);
}
absl::StatusOr<Tensor> exp(const Tensor& x) {
  return Unary(MIXRT_UNARY_EXP, "exp", x);
}
absl::StatusOr<Tensor> log(const Tensor& x) {
  return Unary(MIXRT_UNARY_LOG, "log", x);
}
absl::StatusOr<Tensor> sqrt(const Tensor& x) {
  return Unary(MIXRT_UNARY_SQRT, "sqrt", x);
}
absl::StatusOr<Tensor> pow(const Tensor& x, double exponent) {
  return Unary(MIXRT_UNARY_POW_SCALAR, "pow", x, exponent);
}
absl::StatusOr<Tensor> clamp(const Tensor& x, double min, double max) {
  if (min > max) {
    return absl::InvalidArgumentError(
        absl::StrCat("clamp: min ", min, " is greater than max ", max));
  }
  return Unary(MIXRT_UNARY_CLAMP, "clamp", x, min, max);
}

namespace {

// sum, or mean when `average`: one op each under autocast (mean must not
// reach sum's policy entry: on CUDA sum runs in f32, mean in what it gets).
absl::StatusOr<Tensor> SumOrMean(const char* name, const Tensor& x_in,
                                 absl::Span<const int64_t> dims, bool keepdim,
                                 bool average) {
  MIXRT_ASSIGN_OR_RETURN(
      std::vector<Tensor> in,
      AutocastInputs(name, MIXRT_OP_CLASS_REDUCTION, {x_in}));
  const Tensor& x = in[0];
  MIXRT_ASSIGN_OR_RETURN(Tensor y, kernels::sum(x, dims, keepdim));
  double factor = 1.0;
  if (average) {
    const int64_t n_out = y.numel();
    const double count =
        n_out == 0 ? 1.0 : static_cast<double>(x.numel()) / n_out;
    factor = 1.0 / std::max(count, 1.0);
    MIXRT_ASSIGN_OR_RETURN(y, kernels::scale(y, factor));
  }
  const std::vector<int64_t> d(dims.begin(), dims.end());
  const Shape in_shape = x.shape();
  const DType in_dtype = x.dtype();
  Record(
      average ? "MeanBackward" : "SumBackward", {x}, {&y}, {},
      [d, in_shape, in_dtype, average, factor](
          const std::vector<Tensor>& g, const std::vector<Tensor>&) -> Grads {
        // Restore the reduced dims as size 1, then broadcast back.
        Shape kept = in_shape;
        const int nd = static_cast<int>(in_shape.size());
        if (d.empty()) {
          for (int64_t& k : kept) k = 1;
        } else {
          for (int64_t dim : d) kept[dim < 0 ? dim + nd : dim] = 1;
        }
        Tensor gs = g[0];
        if (average) {
          MIXRT_ASSIGN_OR_RETURN(gs, kernels::scale(gs, factor));
        }
        MIXRT_ASSIGN_OR_RETURN(Tensor gk, gs.reshape(kept));
        MIXRT_ASSIGN_OR_RETURN(Tensor ge, gk.expand(in_shape));
        MIXRT_ASSIGN_OR_RETURN(Tensor dx, ge.to(in_dtype));
        if (dx.shares_storage_with(gk)) {
          MIXRT_ASSIGN_OR_RETURN(dx, ge.contiguous());
        }
        return std::vector<Tensor>{dx};
      });
  return y;
}

}  // namespace

absl::StatusOr<Tensor> sum(const Tensor& x, absl::Span<const int64_t> dims,
                           bool keepdim) {
  return SumOrMean("sum", x, dims, keepdim, /*average=*/false);
}

absl::StatusOr<Tensor> mean(const Tensor& x, absl::Span<const int64_t> dims,
                            bool keepdim) {
  return SumOrMean("mean", x, dims, keepdim, /*average=*/true);
}

}  // namespace mixrt
