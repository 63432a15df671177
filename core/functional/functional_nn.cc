// Differentiable linear algebra and neural-network ops.
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "core/amp/autocast/autocast.h"
#include "core/autograd/function_node.h"
#include "core/functional/ops.h"
#include "core/kernels/batch_norm.h"
#include "core/kernels/dropout.h"
#include "core/kernels/embedding.h"
#include "core/kernels/layer_norm.h"
#include "core/kernels/reduce.h"
#include "core/kernels/softmax.h"
#include "mixrt/status_macros.h"

namespace mixrt {
namespace {

using Grads = absl::StatusOr<std::vector<Tensor>>;

// Weight and bias gradients are produced in f32 (the GEMM accumulates in
// f32 anyway): one rounding fewer before they reach f32 master weights.
// Under AutocastOptions::low_precision_weight_gradients, in the operands'
// dtype instead, as PyTorch does (the cast's backward widens them).
MatmulOptions WeightGradientOut(bool low_precision) {
  MatmulOptions o;
  if (!low_precision) o.out_dtype = DType::kF32;
  return o;
}

// Whether a lower-precision product recorded now makes its weight
// gradients in that precision: asked at the forward, whose autocast
// region the backward runs outside.
bool LowPrecisionWeightGradients(const Tensor& operand) {
  return (operand.dtype() == DType::kF16 || operand.dtype() == DType::kBF16) &&
         AutocastLowPrecisionWeightGradients(operand.device().type());
}

absl::StatusOr<Tensor> MatmulNd(const Tensor& a, const Tensor& b) {
  MIXRT_ASSIGN_OR_RETURN(Tensor y, kernels::matmul(a, b));
  const Shape sa = a.shape(), sb = b.shape();
  const bool low = LowPrecisionWeightGradients(b);
  RecordMasked(
      "MatmulBackward", {a, b}, {&y}, {a, b},
      [sa, sb, low](const std::vector<Tensor>& g, const std::vector<Tensor>& s,
                    const InputGradMask& needs) -> Grads {
        MIXRT_ASSIGN_OR_RETURN(Tensor g0, g[0].to(s[0].dtype()));
        Tensor da, db;
        if (needs[0]) {
          MIXRT_ASSIGN_OR_RETURN(Tensor bt, s[1].transpose(-1, -2));
          MIXRT_ASSIGN_OR_RETURN(da, kernels::matmul(g0, bt));
          MIXRT_ASSIGN_OR_RETURN(da, SumToShape(da, sa));
        }
        if (needs[1]) {
          MIXRT_ASSIGN_OR_RETURN(Tensor at, s[0].transpose(-1, -2));
          MIXRT_ASSIGN_OR_RETURN(
              db, kernels::matmul(at, g0, WeightGradientOut(low)));
          MIXRT_ASSIGN_OR_RETURN(db, SumToShape(db, sb));
        }
        return std::vector<Tensor>{da, db};
      });
  return y;
}

}  // namespace

absl::StatusOr<Tensor> matmul(const Tensor& a_in, const Tensor& b_in) {
  MIXRT_ASSIGN_OR_RETURN(
      std::vector<Tensor> in,
      AutocastInputs("matmul", MIXRT_OP_CLASS_MATMUL, {a_in, b_in}));
  Tensor a = in[0], b = in[1];
  if (!a.defined() || !b.defined() || a.ndim() == 0 || b.ndim() == 0) {
    return kernels::matmul(a, b);  // Its error message.
  }
  // numpy's 1-d rules through differentiable reshapes.
  const bool a_vec = a.ndim() == 1, b_vec = b.ndim() == 1;
  if (a_vec) {
    MIXRT_ASSIGN_OR_RETURN(a, reshape(a, {1, a.shape()[0]}));
  }
  if (b_vec) {
    MIXRT_ASSIGN_OR_RETURN(b, reshape(b, {b.shape()[0], 1}));
  }
  MIXRT_ASSIGN_OR_RETURN(Tensor y, MatmulNd(a, b));
  if (!a_vec && !b_vec) return y;
  Shape out(y.shape().begin(), y.shape().end() - 2);
  if (!a_vec) out.push_back(y.shape()[y.ndim() - 2]);
  if (!b_vec) out.push_back(y.shape()[y.ndim() - 1]);
  return reshape(y, out);
}

absl::StatusOr<Tensor> linear(const Tensor& x_in, const Tensor& w_in,
                              const Tensor& b_in) {
  MIXRT_ASSIGN_OR_RETURN(
      std::vector<Tensor> in,
      AutocastInputs("linear", MIXRT_OP_CLASS_MATMUL, {x_in, w_in, b_in}));
  const Tensor &x = in[0], &w = in[1], &b = in[2];
  MIXRT_ASSIGN_OR_RETURN(Tensor y, kernels::linear(x, w, b));
  const bool has_bias = b.defined();
  const bool low = LowPrecisionWeightGradients(w);
  RecordMasked("LinearBackward", {x, w, b}, {&y}, {x, w},
               [has_bias, low](const std::vector<Tensor>& g,
                               const std::vector<Tensor>& s,
                               const InputGradMask& needs) -> Grads {
                 const Tensor &x = s[0], &w = s[1];
                 const int64_t out = w.shape()[0], in = w.shape()[1];
                 MIXRT_ASSIGN_OR_RETURN(Tensor g0, g[0].to(x.dtype()));
                 // dx = g W; dW = g^T x over all leading dims; db = sum g. Each
                 // only where its input needs it: a network's first layer gets
                 // no dx.
                 Tensor dx, dw, db;
                 if (needs[0]) {
                   MIXRT_ASSIGN_OR_RETURN(dx, kernels::matmul(g0, w));
                 }
                 MIXRT_ASSIGN_OR_RETURN(Tensor g2, g0.reshape({-1, out}));
                 if (needs[1]) {
                   MIXRT_ASSIGN_OR_RETURN(Tensor x2, x.reshape({-1, in}));
                   MIXRT_ASSIGN_OR_RETURN(Tensor g2t, g2.transpose(0, 1));
                   MIXRT_ASSIGN_OR_RETURN(
                       dw, kernels::matmul(g2t, x2, WeightGradientOut(low)));
                 }
                 if (has_bias && needs[2]) {
                   MIXRT_ASSIGN_OR_RETURN(
                       db, kernels::sum(g2, {0}, /*keepdim=*/false,
                                        low ? g2.dtype() : DType::kF32));
                 }
                 return std::vector<Tensor>{dx, dw, db};
               });
  return y;
}

absl::StatusOr<Tensor> softmax(const Tensor& x_in, int64_t dim) {
  MIXRT_ASSIGN_OR_RETURN(
      std::vector<Tensor> in,
      AutocastInputs("softmax", MIXRT_OP_CLASS_SOFTMAX, {x_in}));
  MIXRT_ASSIGN_OR_RETURN(Tensor y, kernels::softmax(in[0], dim));
  Record("SoftmaxBackward", {in[0]}, {&y}, {y},
         [dim](const std::vector<Tensor>& g,
               const std::vector<Tensor>& s) -> Grads {
           MIXRT_ASSIGN_OR_RETURN(Tensor g0, g[0].to(s[0].dtype()));
           MIXRT_ASSIGN_OR_RETURN(Tensor dx,
                                  kernels::softmax_backward(g0, s[0], dim));
           return std::vector<Tensor>{dx};
         });
  return y;
}

absl::StatusOr<Tensor> log_softmax(const Tensor& x_in, int64_t dim) {
  MIXRT_ASSIGN_OR_RETURN(
      std::vector<Tensor> in,
      AutocastInputs("log_softmax", MIXRT_OP_CLASS_SOFTMAX, {x_in}));
  MIXRT_ASSIGN_OR_RETURN(Tensor y, kernels::log_softmax(in[0], dim));
  Record("LogSoftmaxBackward", {in[0]}, {&y}, {y},
         [dim](const std::vector<Tensor>& g,
               const std::vector<Tensor>& s) -> Grads {
           MIXRT_ASSIGN_OR_RETURN(Tensor g0, g[0].to(s[0].dtype()));
           MIXRT_ASSIGN_OR_RETURN(Tensor dx,
                                  kernels::log_softmax_backward(g0, s[0], dim));
           return std::vector<Tensor>{dx};
         });
  return y;
}

absl::StatusOr<Tensor> layer_norm(const Tensor& x_in, int normalized_dims,
                                  const Tensor& w_in, const Tensor& b_in,
                                  double eps) {
  MIXRT_ASSIGN_OR_RETURN(
      std::vector<Tensor> in,
      AutocastInputs("layer_norm", MIXRT_OP_CLASS_NORMALIZATION,
                     {x_in, w_in, b_in}));
  const Tensor &x = in[0], &w = in[1], &b = in[2];
  MIXRT_ASSIGN_OR_RETURN(kernels::LayerNormOutput out,
                         kernels::layer_norm(x, normalized_dims, w, b, eps));
  Tensor y = out.y;
  Record("LayerNormBackward", {x, w, b}, {&y}, {x, w, out.mean, out.rstd},
         [normalized_dims, eps](const std::vector<Tensor>& g,
                                const std::vector<Tensor>& s) -> Grads {
           kernels::LayerNormOutput fwd;
           fwd.mean = s[2];
           fwd.rstd = s[3];
           MIXRT_ASSIGN_OR_RETURN(
               kernels::LayerNormGrads grads,
               kernels::layer_norm_backward(g[0], s[0], fwd, normalized_dims,
                                            s[1], eps));
           return std::vector<Tensor>{grads.grad_x, grads.grad_weight,
                                      grads.grad_bias};
         });
  return y;
}

absl::StatusOr<Tensor> dropout(const Tensor& x, double p,
                               Generator* generator) {
  MIXRT_ASSIGN_OR_RETURN(kernels::DropoutOutput out,
                         kernels::dropout(x, p, generator));
  Tensor y = out.y;
  Record("DropoutBackward", {x}, {&y}, {},
         [state = std::move(out.state)](const std::vector<Tensor>& g,
                                        const std::vector<Tensor>&) -> Grads {
           MIXRT_ASSIGN_OR_RETURN(Tensor dx,
                                  kernels::dropout_backward(g[0], state));
           return std::vector<Tensor>{dx};
         });
  return y;
}

absl::StatusOr<Tensor> embedding(const Tensor& weight, const Tensor& indices,
                                 std::optional<int64_t> padding) {
  MIXRT_ASSIGN_OR_RETURN(Tensor y, kernels::embedding(weight, indices));
  const int64_t rows = weight.shape()[0];
  // The ABI's encoding: a row index, or -1 for none.
  int64_t padding_idx = -1;
  if (padding.has_value()) {
    if (*padding < -rows || *padding >= rows) {
      return absl::InvalidArgumentError(absl::StrCat(
          "embedding: padding_idx ", *padding, " is outside the table's ", rows,
          " rows; expected -", rows, " <= padding_idx < ", rows));
    }
    padding_idx = *padding < 0 ? *padding + rows : *padding;
  }
  Record("EmbeddingBackward", {weight}, {&y}, {indices},
         [rows, padding_idx](const std::vector<Tensor>& g,
                             const std::vector<Tensor>& s) -> Grads {
           MIXRT_ASSIGN_OR_RETURN(
               Tensor dw,
               kernels::embedding_backward(g[0], s[0], rows, padding_idx));
           return std::vector<Tensor>{dw};
         });
  return y;
}

absl::StatusOr<Tensor> conv2d(const Tensor& x_in, const Tensor& w_in,
                              const Tensor& b_in,
                              const Conv2dOptions& options) {
  MIXRT_ASSIGN_OR_RETURN(
      std::vector<Tensor> in,
      AutocastInputs("conv2d", MIXRT_OP_CLASS_CONV, {x_in, w_in, b_in}));
  const Tensor &x = in[0], &w = in[1], &b = in[2];
  Conv2dOptions plain = options;
  plain.activation = MIXRT_ACTIVATION_NONE;  // Differentiated separately.
  MIXRT_ASSIGN_OR_RETURN(Tensor y, kernels::conv2d(x, w, b, plain));
  const bool has_bias = b.defined();
  RecordMasked(
      "Conv2dBackward", {x, w, b}, {&y}, {x, w},
      [plain, has_bias](const std::vector<Tensor>& g,
                        const std::vector<Tensor>& s,
                        const InputGradMask& needs) -> Grads {
        MIXRT_ASSIGN_OR_RETURN(Tensor g0, g[0].to(s[0].dtype()));
        // The data gradient of a network's first convolution (the images)
        // goes nowhere: not computed.
        Tensor dx;
        if (needs[0]) {
          MIXRT_ASSIGN_OR_RETURN(
              dx, kernels::conv2d_backward_data(g0, s[1], s[0].shape(), plain));
        }
        kernels::Conv2dWeightGrads dw;
        if (needs[1] || needs[2]) {
          MIXRT_ASSIGN_OR_RETURN(
              dw, kernels::conv2d_backward_weights(
                      g0, s[0], s[1].shape(), has_bias && needs[2], plain));
        }
        return std::vector<Tensor>{dx, needs[1] ? dw.grad_weight : Tensor(),
                                   dw.grad_bias};
      });
  if (options.activation == MIXRT_ACTIVATION_RELU) return relu(y);
  if (options.activation == MIXRT_ACTIVATION_GELU) return gelu(y);
  if (options.activation == MIXRT_ACTIVATION_GELU_TANH) return gelu(y, true);
  return y;
}

absl::StatusOr<Tensor> pool2d(const Tensor& x, const Pool2dOptions& options) {
  MIXRT_ASSIGN_OR_RETURN(Tensor y, kernels::pool2d(x, options));
  Record("Pool2dBackward", {x}, {&y}, {x},
         [options](const std::vector<Tensor>& g,
                   const std::vector<Tensor>& s) -> Grads {
           MIXRT_ASSIGN_OR_RETURN(
               Tensor dx, kernels::pool2d_backward(g[0], s[0], options));
           return std::vector<Tensor>{dx};
         });
  return y;
}

absl::StatusOr<Tensor> batch_norm(const Tensor& x, const Tensor& weight,
                                  const Tensor& bias,
                                  const Tensor& running_mean,
                                  const Tensor& running_var, bool training,
                                  double momentum, double eps) {
  MIXRT_ASSIGN_OR_RETURN(
      kernels::BatchNormOutput out,
      kernels::batch_norm(x, weight, bias, running_mean, running_var, training,
                          momentum, eps));
  Tensor y = out.y;
  Record("BatchNormBackward", {x, weight, bias}, {&y},
         {x, weight, out.save_mean, out.save_invstd},
         [training, eps](const std::vector<Tensor>& g,
                         const std::vector<Tensor>& s) -> Grads {
           kernels::BatchNormOutput fwd;
           fwd.save_mean = s[2];
           fwd.save_invstd = s[3];
           MIXRT_ASSIGN_OR_RETURN(kernels::BatchNormGrads grads,
                                  kernels::batch_norm_backward(
                                      g[0], s[0], s[1], fwd, training, eps));
           return std::vector<Tensor>{grads.grad_x, grads.grad_weight,
                                      grads.grad_bias};
         });
  return y;
}

}  // namespace mixrt
