// Dispatch, creation and pointwise ops.
#include "backends/gpu/gpu_ops.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "mixrt/op_names.h"
#include "mixrt/status_macros.h"
#include "plugins/sdk/call_decoders.h"

namespace mixrt::gpu {
namespace {

DeviceTensor In(const sdk::KernelCall& call, size_t i) {
  return Tensor(call.inputs[i]);
}

DeviceTensor Out(const sdk::KernelCall& call, size_t i) {
  return Tensor(call.outputs[i]);
}

absl::Status Creation(GpuDevice& device, const sdk::KernelCall& call) {
  MIXRT_RETURN_IF_ERROR(ExpectArity(call, 0, 0, 1));
  const DeviceTensor out = Out(call, 0);
  switch (call.op) {
    case MIXRT_OP_FILL: {
      MIXRT_ASSIGN_OR_RETURN(auto a, call.GetAttrs<MixrtScalarAttrs>());
      return Launched(
          LaunchElementwise(device.ctx, FillFunctor{out, a->value}, out.numel),
          "fill");
    }
    case MIXRT_OP_ARANGE: {
      MIXRT_ASSIGN_OR_RETURN(auto a, call.GetAttrs<MixrtArangeAttrs>());
      return Launched(
          LaunchElementwise(device.ctx, ArangeFunctor{out, a->start, a->step},
                            out.numel),
          "arange");
    }
    default: {
      MIXRT_ASSIGN_OR_RETURN(auto a, call.GetAttrs<MixrtRandomAttrs>());
      if (!IsFloating(out.dtype)) {
        return absl::InvalidArgumentError("random ops need a floating output");
      }
      const RandomFunctor f{out, *a, call.op == MIXRT_OP_RANDOM_NORMAL};
      return Launched(LaunchElementwise(device.ctx, f, out.numel), "random");
    }
  }
}

absl::Status Binary(GpuDevice& device, const sdk::KernelCall& call) {
  MIXRT_ASSIGN_OR_RETURN(auto attrs,
                         sdk::PointwiseAttrs(call, MIXRT_BINARY_COUNT));
  BinaryFunctor f{Out(call, 0), In(call, 0), In(call, 1),
                  static_cast<MixrtBinaryKind>(attrs.kind), nullptr};
  if (f.x.dtype != f.out.dtype || f.y.dtype != f.out.dtype ||
      f.out.dtype == MIXRT_DTYPE_BOOL) {
    return absl::InvalidArgumentError(
        "binary op needs one non-bool dtype for inputs and output");
  }
  const bool checks_divisor =
      !IsFloating(f.out.dtype) &&
      (f.kind == MIXRT_BINARY_DIV || f.kind == MIXRT_BINARY_POW);
  if (!checks_divisor) {
    return Launched(LaunchElementwise(device.ctx, f, f.out.numel), "binary");
  }
  return LaunchCheckingInput(
      device, "binary",
      f.kind == MIXRT_BINARY_DIV
          ? "integer division by zero"
          : "integers cannot be raised to negative integer powers",
      [&](int32_t* flag) {
        f.bad_input = flag;
        return LaunchElementwise(device.ctx, f, f.out.numel);
      });
}

absl::Status Unary(GpuDevice& device, const sdk::KernelCall& call,
                   bool backward) {
  MIXRT_ASSIGN_OR_RETURN(auto attrs,
                         sdk::PointwiseAttrs(call, MIXRT_UNARY_COUNT));
  UnaryFunctor f{Out(call, 0),
                 In(call, backward ? 1 : 0),
                 backward ? In(call, 0) : DeviceTensor(),
                 static_cast<MixrtUnaryKind>(attrs.kind),
                 static_cast<float>(attrs.alpha),
                 static_cast<float>(attrs.beta),
                 backward};
  for (const sdk::TensorRef& t : call.inputs) {
    if (t.dtype() != f.out.dtype) {
      return absl::InvalidArgumentError("unary op needs one dtype throughout");
    }
  }
  if (!IsFloating(f.out.dtype)) {
    const bool int_ok =
        !backward && f.out.dtype != MIXRT_DTYPE_BOOL &&
        (f.kind == MIXRT_UNARY_NEG || f.kind == MIXRT_UNARY_ABS);
    if (!int_ok) {
      return absl::InvalidArgumentError(
          absl::StrCat("unary kind ", f.kind, " needs a floating tensor"));
    }
  }
  return Launched(LaunchElementwise(device.ctx, f, f.out.numel), "unary");
}

absl::Status Compare(GpuDevice& device, const sdk::KernelCall& call) {
  MIXRT_ASSIGN_OR_RETURN(auto attrs,
                         sdk::PointwiseAttrs(call, MIXRT_COMPARE_COUNT));
  const CompareFunctor f{Out(call, 0), In(call, 0), In(call, 1),
                         static_cast<MixrtCompareKind>(attrs.kind)};
  if (f.x.dtype != f.y.dtype || f.out.dtype != MIXRT_DTYPE_BOOL) {
    return absl::InvalidArgumentError(
        "compare needs inputs of one dtype and a bool output");
  }
  return Launched(LaunchElementwise(device.ctx, f, f.out.numel), "compare");
}

absl::Status Where(GpuDevice& device, const sdk::KernelCall& call) {
  const WhereFunctor f{Out(call, 0), In(call, 0), In(call, 1), In(call, 2)};
  if (f.condition.dtype != MIXRT_DTYPE_BOOL || f.x.dtype != f.out.dtype ||
      f.y.dtype != f.out.dtype) {
    return absl::InvalidArgumentError(
        "where needs a bool condition and one dtype for values and output");
  }
  return Launched(LaunchElementwise(device.ctx, f, f.out.numel), "where");
}

absl::Status Pointwise(GpuDevice& device, const sdk::KernelCall& call) {
  size_t inputs = 2;
  if (call.op == MIXRT_OP_UNARY) inputs = 1;
  if (call.op == MIXRT_OP_WHERE) inputs = 3;
  MIXRT_RETURN_IF_ERROR(ExpectArity(call, inputs, inputs, 1));
  MIXRT_RETURN_IF_ERROR(ExpectSameShapes(call));
  switch (call.op) {
    case MIXRT_OP_BINARY:
      return Binary(device, call);
    case MIXRT_OP_UNARY:
      return Unary(device, call, /*backward=*/false);
    case MIXRT_OP_UNARY_BACKWARD:
      return Unary(device, call, /*backward=*/true);
    case MIXRT_OP_COMPARE:
      return Compare(device, call);
    default:
      return Where(device, call);
  }
}

absl::Status Copy(GpuDevice& device, const sdk::KernelCall& call) {
  MIXRT_RETURN_IF_ERROR(ExpectArity(call, 1, 1, 1));
  MIXRT_RETURN_IF_ERROR(ExpectSameShapes(call));
  const CopyFunctor f{Out(call, 0), In(call, 0)};
  return Launched(LaunchElementwise(device.ctx, f, f.out.numel), "copy");
}

absl::Status Dropout(GpuDevice& device, const sdk::KernelCall& call) {
  MIXRT_ASSIGN_OR_RETURN(const sdk::DropoutCall d, sdk::DecodeDropout(call));
  const DropoutFunctor f{Out(call, 0), In(call, 0), d.attrs};
  return Launched(LaunchElementwise(device.ctx, f, f.out.numel), "dropout");
}

}  // namespace

absl::Status Launched(int error, const char* kernel) {
  return RuntimeStatus(static_cast<rt::Error>(error), kernel);
}

absl::Status RunOp(GpuDevice& device, const sdk::KernelCall& call) {
  switch (call.op) {
    case MIXRT_OP_FILL:
    case MIXRT_OP_ARANGE:
    case MIXRT_OP_RANDOM_UNIFORM:
    case MIXRT_OP_RANDOM_NORMAL:
      return Creation(device, call);
    case MIXRT_OP_COPY:
      return Copy(device, call);
    case MIXRT_OP_DROPOUT:
      return Dropout(device, call);
    case MIXRT_OP_BINARY:
    case MIXRT_OP_UNARY:
    case MIXRT_OP_UNARY_BACKWARD:
    case MIXRT_OP_COMPARE:
    case MIXRT_OP_WHERE:
      return Pointwise(device, call);
    case MIXRT_OP_REDUCE:
      return RunReduce(device, call);
    case MIXRT_OP_MULTI_TENSOR_NORM:
      return RunMultiTensorNorm(device, call);
    case MIXRT_OP_SOFTMAX:
    case MIXRT_OP_LOG_SOFTMAX:
    case MIXRT_OP_SOFTMAX_BACKWARD:
    case MIXRT_OP_LOG_SOFTMAX_BACKWARD:
      return RunSoftmax(device, call);
    case MIXRT_OP_LAYER_NORM:
    case MIXRT_OP_LAYER_NORM_BACKWARD:
      return RunLayerNorm(device, call);
    case MIXRT_OP_CROSS_ENTROPY:
    case MIXRT_OP_CROSS_ENTROPY_BACKWARD:
      return RunCrossEntropy(device, call);
    case MIXRT_OP_NON_FINITE_CHECK_AND_UNSCALE:
    case MIXRT_OP_UPDATE_SCALE:
    case MIXRT_OP_SGD_STEP:
    case MIXRT_OP_MULTI_TENSOR_SGD_STEP:
    case MIXRT_OP_ADAMW_STEP:
      return RunOptimizer(device, call);
    case MIXRT_OP_EMBEDDING:
    case MIXRT_OP_EMBEDDING_BACKWARD:
      return RunEmbedding(device, call);
    case MIXRT_OP_BATCH_NORM:
    case MIXRT_OP_BATCH_NORM_BACKWARD:
      return RunBatchNorm(device, call);
    case MIXRT_OP_CONV2D:
    case MIXRT_OP_CONV2D_BACKWARD_DATA:
    case MIXRT_OP_CONV2D_BACKWARD_WEIGHTS:
    case MIXRT_OP_POOL2D:
    case MIXRT_OP_POOL2D_BACKWARD:
      return RunConvPool(device, call);
    case MIXRT_OP_SCALED_DOT_PRODUCT_ATTENTION:
    case MIXRT_OP_SCALED_DOT_PRODUCT_ATTENTION_BACKWARD:
      return RunAttention(device, call);
    default:
      return absl::UnimplementedError(absl::StrCat(
          "op ", static_cast<int>(call.op), " (", MixrtOpName(call.op),
          ") is unknown to the GPU plugins"));
  }
}

}  // namespace mixrt::gpu
