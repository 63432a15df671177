#include "core/kernels/pointwise.h"

#include <cmath>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "core/kernels/op_checks.h"
#include "core/tensor/kernel_launch.h"
#include "mixrt/status_macros.h"

namespace mixrt::kernels {
namespace {

constexpr const char* kBinaryNames[MIXRT_BINARY_COUNT] = {
    "add", "sub", "mul", "div", "pow", "maximum", "minimum"};
constexpr const char* kUnaryNames[MIXRT_UNARY_COUNT] = {
    "neg",  "abs",     "relu",  "leaky_relu", "gelu", "gelu_tanh",
    "silu", "sigmoid", "tanh",  "exp",        "log",  "log1p",
    "sqrt", "rsqrt",   "clamp", "pow",        "scale"};
constexpr const char* kCompareNames[MIXRT_COMPARE_COUNT] = {"eq", "ne", "lt",
                                                            "le", "gt", "ge"};

MixrtPointwiseAttrs Attrs(uint32_t kind, double alpha = 0, double beta = 0) {
  MixrtPointwiseAttrs attrs{};
  attrs.struct_size = sizeof(attrs);
  attrs.kind = kind;
  attrs.alpha = alpha;
  attrs.beta = beta;
  return attrs;
}

absl::Status CheckNotBool(const Tensor& t, absl::string_view op) {
  if (absl::Status s = CheckDefined(t, op); !s.ok()) return s;
  if (t.dtype() == DType::kBool) {
    return absl::InvalidArgumentError(absl::StrCat(
        op, ": bool tensors are not supported; convert with to(DType::kI64)"));
  }
  return absl::OkStatus();
}

// Broadcasts `inputs` to one shape, converts them to `dtype` and launches
// `op` into a new tensor of `out_dtype`.
absl::StatusOr<Tensor> LaunchBroadcast(MixrtOp op, absl::string_view name,
                                       std::vector<Tensor> inputs,
                                       DType compute_dtype, DType out_dtype,
                                       const void* attrs,
                                       size_t first_converted = 0) {
  Shape shape = inputs[0].shape();
  for (size_t i = 1; i < inputs.size(); ++i) {
    MIXRT_RETURN_IF_ERROR(CheckSameDevice(inputs[0], inputs[i], name));
    MIXRT_ASSIGN_OR_RETURN(shape,
                           BroadcastShapes(shape, inputs[i].shape(), name));
  }
  for (size_t i = 0; i < inputs.size(); ++i) {
    // Operands already of the dtype and shape stay as they are (a new
    // tensor per operand and op was a tenth of a small op's time).
    if (i >= first_converted && inputs[i].dtype() != compute_dtype) {
      MIXRT_ASSIGN_OR_RETURN(inputs[i], inputs[i].to(compute_dtype));
    }
    if (inputs[i].shape() != shape) {
      MIXRT_ASSIGN_OR_RETURN(inputs[i], inputs[i].expand(shape));
    }
  }
  MIXRT_ASSIGN_OR_RETURN(Tensor out,
                         empty(shape, out_dtype, inputs[0].device()));
  if (out.numel() == 0) return out;
  const Tensor outs[] = {out};
  MIXRT_RETURN_IF_ERROR(LaunchKernel(op, inputs, outs, attrs));
  return out;
}

}  // namespace

absl::StatusOr<Tensor> binary(MixrtBinaryKind kind, const Tensor& a,
                              const Tensor& b) {
  const char* name = kBinaryNames[kind];
  MIXRT_RETURN_IF_ERROR(CheckNotBool(a, name));
  MIXRT_RETURN_IF_ERROR(CheckNotBool(b, name));
  const DType dtype = PromoteTypes(a.dtype(), b.dtype());
  const MixrtPointwiseAttrs attrs = Attrs(kind);
  return LaunchBroadcast(MIXRT_OP_BINARY, name, {a, b}, dtype, dtype, &attrs);
}

absl::StatusOr<Tensor> add(const Tensor& a, const Tensor& b) {
  return binary(MIXRT_BINARY_ADD, a, b);
}
absl::StatusOr<Tensor> sub(const Tensor& a, const Tensor& b) {
  return binary(MIXRT_BINARY_SUB, a, b);
}
absl::StatusOr<Tensor> mul(const Tensor& a, const Tensor& b) {
  return binary(MIXRT_BINARY_MUL, a, b);
}
absl::StatusOr<Tensor> div(const Tensor& a, const Tensor& b) {
  return binary(MIXRT_BINARY_DIV, a, b);
}
absl::StatusOr<Tensor> pow(const Tensor& a, const Tensor& b) {
  return binary(MIXRT_BINARY_POW, a, b);
}
absl::StatusOr<Tensor> maximum(const Tensor& a, const Tensor& b) {
  return binary(MIXRT_BINARY_MAXIMUM, a, b);
}
absl::StatusOr<Tensor> minimum(const Tensor& a, const Tensor& b) {
  return binary(MIXRT_BINARY_MINIMUM, a, b);
}

absl::StatusOr<Tensor> unary(MixrtUnaryKind kind, const Tensor& x, double alpha,
                             double beta) {
  const char* name = kUnaryNames[kind];
  MIXRT_RETURN_IF_ERROR(CheckNotBool(x, name));
  const bool integer_ok = kind == MIXRT_UNARY_NEG || kind == MIXRT_UNARY_ABS;
  if (!integer_ok) MIXRT_RETURN_IF_ERROR(CheckFloating(x, name));
  const MixrtPointwiseAttrs attrs = Attrs(kind, alpha, beta);
  return LaunchBroadcast(MIXRT_OP_UNARY, name, {x}, x.dtype(), x.dtype(),
                         &attrs);
}

absl::StatusOr<Tensor> unary_backward(MixrtUnaryKind kind,
                                      const Tensor& grad_out, const Tensor& x,
                                      double alpha, double beta) {
  const std::string name = absl::StrCat(kUnaryNames[kind], "_backward");
  MIXRT_RETURN_IF_ERROR(CheckFloating(x, name));
  MIXRT_RETURN_IF_ERROR(CheckFloating(grad_out, name));
  if (grad_out.shape() != x.shape()) {
    return absl::InvalidArgumentError(
        absl::StrCat(name, ": grad_out ", ShapeToString(grad_out.shape()),
                     " and input ", ShapeToString(x.shape()), " differ"));
  }
  const MixrtPointwiseAttrs attrs = Attrs(kind, alpha, beta);
  return LaunchBroadcast(MIXRT_OP_UNARY_BACKWARD, name, {grad_out, x},
                         x.dtype(), x.dtype(), &attrs);
}

absl::StatusOr<Tensor> neg(const Tensor& x) {
  return unary(MIXRT_UNARY_NEG, x);
}
absl::StatusOr<Tensor> abs(const Tensor& x) {
  return unary(MIXRT_UNARY_ABS, x);
}
absl::StatusOr<Tensor> relu(const Tensor& x) {
  return unary(MIXRT_UNARY_RELU, x);
}
absl::StatusOr<Tensor> leaky_relu(const Tensor& x, double negative_slope) {
  return unary(MIXRT_UNARY_LEAKY_RELU, x, negative_slope);
}
absl::StatusOr<Tensor> gelu(const Tensor& x, bool tanh_approximation) {
  return unary(tanh_approximation ? MIXRT_UNARY_GELU_TANH : MIXRT_UNARY_GELU,
               x);
}
absl::StatusOr<Tensor> silu(const Tensor& x) {
  return unary(MIXRT_UNARY_SILU, x);
}
absl::StatusOr<Tensor> sigmoid(const Tensor& x) {
  return unary(MIXRT_UNARY_SIGMOID, x);
}
absl::StatusOr<Tensor> tanh(const Tensor& x) {
  return unary(MIXRT_UNARY_TANH, x);
}
absl::StatusOr<Tensor> exp(const Tensor& x) {
  return unary(MIXRT_UNARY_EXP, x);
}
absl::StatusOr<Tensor> log(const Tensor& x) {
  return unary(MIXRT_UNARY_LOG, x);
}
absl::StatusOr<Tensor> log1p(const Tensor& x) {
  return unary(MIXRT_UNARY_LOG1P, x);
}
absl::StatusOr<Tensor> sqrt(const Tensor& x) {
  return unary(MIXRT_UNARY_SQRT, x);
}
absl::StatusOr<Tensor> rsqrt(const Tensor& x) {
  return unary(MIXRT_UNARY_RSQRT, x);
}
absl::StatusOr<Tensor> clamp(const Tensor& x, double min, double max) {
  if (min > max) {
    return absl::InvalidArgumentError(
        absl::StrCat("clamp: min ", min, " is greater than max ", max));
  }
  return unary(MIXRT_UNARY_CLAMP, x, min, max);
}
absl::StatusOr<Tensor> pow(const Tensor& x, double exponent) {
  return unary(MIXRT_UNARY_POW_SCALAR, x, exponent);
}
absl::StatusOr<Tensor> scale(const Tensor& x, double alpha, double beta) {
  return unary(MIXRT_UNARY_SCALE, x, alpha, beta);
}

absl::StatusOr<Tensor> compare(MixrtCompareKind kind, const Tensor& a,
                               const Tensor& b) {
  const char* name = kCompareNames[kind];
  MIXRT_RETURN_IF_ERROR(CheckDefined(a, name));
  MIXRT_RETURN_IF_ERROR(CheckDefined(b, name));
  const DType dtype = PromoteTypes(a.dtype(), b.dtype());
  const MixrtPointwiseAttrs attrs = Attrs(kind);
  return LaunchBroadcast(MIXRT_OP_COMPARE, name, {a, b}, dtype, DType::kBool,
                         &attrs);
}

absl::StatusOr<Tensor> eq(const Tensor& a, const Tensor& b) {
  return compare(MIXRT_COMPARE_EQ, a, b);
}
absl::StatusOr<Tensor> ne(const Tensor& a, const Tensor& b) {
  return compare(MIXRT_COMPARE_NE, a, b);
}
absl::StatusOr<Tensor> lt(const Tensor& a, const Tensor& b) {
  return compare(MIXRT_COMPARE_LT, a, b);
}
absl::StatusOr<Tensor> le(const Tensor& a, const Tensor& b) {
  return compare(MIXRT_COMPARE_LE, a, b);
}
absl::StatusOr<Tensor> gt(const Tensor& a, const Tensor& b) {
  return compare(MIXRT_COMPARE_GT, a, b);
}
absl::StatusOr<Tensor> ge(const Tensor& a, const Tensor& b) {
  return compare(MIXRT_COMPARE_GE, a, b);
}

absl::StatusOr<Tensor> where(const Tensor& condition, const Tensor& x,
                             const Tensor& y) {
  MIXRT_RETURN_IF_ERROR(CheckDefined(condition, "where"));
  MIXRT_RETURN_IF_ERROR(CheckDefined(x, "where"));
  MIXRT_RETURN_IF_ERROR(CheckDefined(y, "where"));
  if (condition.dtype() != DType::kBool) {
    return absl::InvalidArgumentError(
        absl::StrCat("where: the condition must be bool, got ",
                     DTypeName(condition.dtype())));
  }
  const DType dtype = PromoteTypes(x.dtype(), y.dtype());
  return LaunchBroadcast(MIXRT_OP_WHERE, "where", {condition, x, y}, dtype,
                         dtype, nullptr, /*first_converted=*/1);
}

}  // namespace mixrt::kernels
