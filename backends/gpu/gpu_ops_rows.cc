// Reductions, softmax, layer norm and cross entropy: the row kernels.
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "backends/gpu/gpu_ops.h"
#include "backends/gpu/multi_tensor_plan.h"
#include "mixrt/status_macros.h"
#include "plugins/sdk/call_decoders.h"

namespace mixrt::gpu {
absl::Status RunReduce(GpuDevice& device, const sdk::KernelCall& call) {
  MIXRT_RETURN_IF_ERROR(ExpectArity(call, 1, 1, 1));
  MIXRT_ASSIGN_OR_RETURN(auto attrs, call.GetAttrs<MixrtReduceAttrs>());
  if (attrs->kind >= MIXRT_REDUCE_COUNT) {
    return absl::UnimplementedError(
        absl::StrCat("reduce kind ", attrs->kind, " is unknown here"));
  }
  ReduceRows f{Tensor(call.outputs[0]),
               Tensor(call.inputs[0]),
               static_cast<MixrtReduceKind>(attrs->kind),
               attrs->axes_mask,
               static_cast<float>(attrs->correction),
               1};
  if (!IsFloating(f.in.dtype) || !IsFloating(f.out.dtype) ||
      f.out.ndim != f.in.ndim) {
    return absl::InvalidArgumentError(
        "reduce takes a floating tensor and an output of the same rank");
  }
  for (int d = 0; d < f.in.ndim; ++d) {
    const bool reduced = (f.axes_mask >> d) & 1u;
    if (f.out.shape[d] != (reduced ? 1 : f.in.shape[d])) {
      return absl::InvalidArgumentError(
          absl::StrCat("reduce: output dim ", d, " is ", f.out.shape[d],
                       ", expected ", reduced ? 1 : f.in.shape[d]));
    }
    if (reduced) f.reduced_count *= f.in.shape[d];
  }
  f.split = ReduceSplit(f.out.numel, f.reduced_count, device.ctx.limits);
  if (f.split == 1) {
    return Launched(LaunchRows(device.ctx, f, f.out.numel, f.reduced_count),
                    "reduce");
  }
  std::lock_guard<std::mutex> lock(device.scratch_mutex);
  MIXRT_ASSIGN_OR_RETURN(
      auto scratch, device.Scratch(static_cast<size_t>(f.out.numel * f.split) *
                                   sizeof(RowAcc)));
  f.partials = static_cast<RowAcc*>(scratch);
  MIXRT_RETURN_IF_ERROR(
      Launched(LaunchRows(device.ctx, f, f.out.numel * f.split,
                          f.reduced_count / f.split),
               "reduce (partials)"));
  return Launched(
      LaunchElementwise(device.ctx, ReduceCombineFunctor{f}, f.out.numel),
      "reduce (combine)");
}

absl::Status RunSoftmax(GpuDevice& device, const sdk::KernelCall& call) {
  const bool backward = call.op == MIXRT_OP_SOFTMAX_BACKWARD ||
                        call.op == MIXRT_OP_LOG_SOFTMAX_BACKWARD;
  const bool log = call.op == MIXRT_OP_LOG_SOFTMAX ||
                   call.op == MIXRT_OP_LOG_SOFTMAX_BACKWARD;
  const size_t inputs = backward ? 2 : 1;
  MIXRT_RETURN_IF_ERROR(ExpectArity(call, inputs, inputs, 1));
  MIXRT_ASSIGN_OR_RETURN(auto attrs, call.GetAttrs<MixrtAxisAttrs>());
  const sdk::TensorRef& out = call.outputs[0];
  const int axis = attrs->axis;
  if (axis < 0 || axis >= out.ndim()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "softmax axis ", axis, " is outside [0, ", out.ndim(), ")"));
  }
  for (const sdk::TensorRef& t : call.inputs) {
    if (!t.same_shape(out) || !IsFloating(t.dtype())) {
      return absl::InvalidArgumentError(
          "softmax tensors must be floating and of one shape");
    }
  }
  AxisRows rows;
  rows.extent = out.dim(axis);
  for (int d = axis + 1; d < out.ndim(); ++d) rows.inner *= out.dim(d);
  const int64_t count = rows.extent == 0 ? 0 : out.numel() / rows.extent;
  if (!backward) {
    const SoftmaxRows f{Tensor(out), Tensor(call.inputs[0]), rows, log};
    return Launched(LaunchRows(device.ctx, f, count, rows.extent), "softmax");
  }
  const SoftmaxBackwardRows f{Tensor(out), Tensor(call.inputs[0]),
                              Tensor(call.inputs[1]), rows, log};
  return Launched(LaunchRows(device.ctx, f, count, rows.extent),
                  "softmax_backward");
}

absl::Status RunLayerNorm(GpuDevice& device, const sdk::KernelCall& call) {
  MIXRT_ASSIGN_OR_RETURN(auto attrs, call.GetAttrs<MixrtNormAttrs>());
  if (call.op == MIXRT_OP_LAYER_NORM) {
    MIXRT_RETURN_IF_ERROR(ExpectArity(call, 1, 3, 3));
    const sdk::TensorRef& x = call.inputs[0];
    if (x.ndim() != 2 || !x.same_shape(call.outputs[0]) ||
        call.inputs.size() == 2) {
      return absl::InvalidArgumentError(
          "layer_norm takes x [R, N] and optionally both weight and bias");
    }
    const bool affine = call.inputs.size() == 3;
    const LayerNormRows f{Tensor(call.outputs[0]),
                          Tensor(call.outputs[1]),
                          Tensor(call.outputs[2]),
                          Tensor(x),
                          affine ? Tensor(call.inputs[1]) : DeviceTensor(),
                          affine ? Tensor(call.inputs[2]) : DeviceTensor(),
                          x.dim(1),
                          static_cast<float>(attrs->eps),
                          affine};
    return Launched(LaunchRows(device.ctx, f, x.dim(0), x.dim(1)),
                    "layer_norm");
  }
  const bool affine = call.inputs.size() == 5;
  MIXRT_RETURN_IF_ERROR(ExpectArity(call, 4, 5, affine ? 3 : 1));
  const sdk::TensorRef& x = call.inputs[1];
  if (x.ndim() != 2) {
    return absl::InvalidArgumentError("layer_norm_backward takes x [R, N]");
  }
  const int64_t rows = x.dim(0), n = x.dim(1);
  const LayerNormBackwardRows f{
      Tensor(call.outputs[0]),
      Tensor(call.inputs[0]),
      Tensor(x),
      Tensor(call.inputs[2]),
      Tensor(call.inputs[3]),
      affine ? Tensor(call.inputs[4]) : DeviceTensor(),
      n,
      affine};
  if (absl::Status s =
          Launched(LaunchRows(device.ctx, f, rows, n), "layer_norm_backward");
      !s.ok() || !affine) {
    return s;
  }
  const LayerNormParamGradColumns g{Tensor(call.outputs[1]),
                                    Tensor(call.outputs[2]),
                                    Tensor(call.inputs[0]),
                                    Tensor(x),
                                    Tensor(call.inputs[2]),
                                    Tensor(call.inputs[3]),
                                    rows,
                                    n};
  return Launched(LaunchRows(device.ctx, g, n, rows),
                  "layer_norm_backward (weight and bias)");
}

absl::Status RunMultiTensorNorm(GpuDevice& device,
                                const sdk::KernelCall& call) {
  MIXRT_RETURN_IF_ERROR(sdk::ExpectMultiTensorNorm(call));
  std::vector<MultiTensorInput> tensors;
  for (const sdk::TensorRef& t : call.inputs) {
    tensors.push_back({t.data(), static_cast<uint32_t>(t.dtype()), t.numel()});
  }
  const std::vector<MultiTensorLaunch> launches =
      PlanMultiTensorLaunches(tensors);
  int64_t chunks = 0;
  for (const MultiTensorLaunch& l : launches) chunks += l.num_blocks;
  float* partials = nullptr;
  if (chunks > 0) {
    MIXRT_ASSIGN_OR_RETURN(void* scratch,
                           device.Scratch(chunks * sizeof(float)));
    partials = static_cast<float*>(scratch);
  }
  int64_t first = 0;
  for (const MultiTensorLaunch& l : launches) {
    const MultiTensorNormRows f{l, partials, first};
    MIXRT_RETURN_IF_ERROR(
        Launched(LaunchRows(device.ctx, f, l.num_blocks, kMultiTensorChunk),
                 "multi_tensor_norm"));
    first += l.num_blocks;
  }
  const MultiTensorNormFinish finish{
      partials, chunks, static_cast<float*>(call.outputs[0].data())};
  return Launched(LaunchElementwise(device.ctx, finish, 1),
                  "multi_tensor_norm (combine)");
}

absl::Status RunCrossEntropy(GpuDevice& device, const sdk::KernelCall& call) {
  MIXRT_ASSIGN_OR_RETURN(sdk::CrossEntropyCall ce,
                         sdk::DecodeCrossEntropy(call));
  const bool backward = ce.backward;
  const MixrtCrossEntropyAttrs* attrs = ce.attrs;
  const sdk::TensorRef& logits = *ce.logits;
  const sdk::TensorRef& target = *ce.target;
  CrossEntropyRows f{Tensor(call.outputs[0]),
                     Tensor(logits),
                     Tensor(target),
                     backward ? Tensor(call.inputs[0]) : DeviceTensor(),
                     logits.dim(1),
                     attrs->ignore_index,
                     static_cast<float>(attrs->label_smoothing),
                     attrs->log_probs_input != 0,
                     backward,
                     nullptr};
  return LaunchCheckingInput(
      device, "cross_entropy",
      "cross_entropy: a target is outside [0, classes) and is not "
      "ignore_index",
      [&](int32_t* flag) {
        f.bad_input = flag;
        return LaunchRows(device.ctx, f, logits.dim(0), logits.dim(1));
      });
}

}  // namespace mixrt::gpu
