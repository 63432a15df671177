// Batch normalization, forward and backward: one block per channel.
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "backends/gpu/batch_norm_functors.h"
#include "backends/gpu/gpu_ops.h"
#include "mixrt/status_macros.h"

namespace mixrt::gpu {
namespace {

absl::StatusOr<ChannelElements> Channels(const sdk::TensorRef& x) {
  if (x.ndim() < 2 || !IsFloating(x.dtype())) {
    return absl::InvalidArgumentError(
        "batch_norm takes a floating x [N, C, ...]");
  }
  ChannelElements e;
  e.channels = x.dim(1);
  for (int d = 2; d < x.ndim(); ++d) e.spatial *= x.dim(d);
  e.count = x.dim(0) * e.spatial;
  return e;
}

}  // namespace

absl::Status RunBatchNorm(GpuDevice& device, const sdk::KernelCall& call) {
  MIXRT_ASSIGN_OR_RETURN(auto attrs, call.GetAttrs<MixrtBatchNormAttrs>());
  const bool training = attrs->training != 0;
  if (call.op == MIXRT_OP_BATCH_NORM) {
    MIXRT_RETURN_IF_ERROR(ExpectArity(call, 3, 3, 5));
    MIXRT_ASSIGN_OR_RETURN(auto e, Channels(call.inputs[0]));
    if (!call.inputs[0].same_shape(call.outputs[0])) {
      return absl::InvalidArgumentError("batch_norm: y must have x's shape");
    }
    if (training && e.count < 2) {
      return absl::InvalidArgumentError(
          "batch_norm: training needs more than one value per channel");
    }
    const BatchNormChannels f{Tensor(call.outputs[0]),
                              Tensor(call.outputs[1]),
                              Tensor(call.outputs[2]),
                              Tensor(call.outputs[3]),
                              Tensor(call.outputs[4]),
                              Tensor(call.inputs[0]),
                              Tensor(call.inputs[1]),
                              Tensor(call.inputs[2]),
                              e,
                              static_cast<float>(attrs->momentum),
                              static_cast<float>(attrs->eps),
                              training};
    return Launched(LaunchRows(device.ctx, f, e.channels, e.count),
                    "batch_norm");
  }
  MIXRT_RETURN_IF_ERROR(ExpectArity(call, 5, 5, 3));
  MIXRT_ASSIGN_OR_RETURN(auto e, Channels(call.inputs[1]));
  const BatchNormBackwardChannels f{Tensor(call.outputs[0]),
                                    Tensor(call.outputs[1]),
                                    Tensor(call.outputs[2]),
                                    Tensor(call.inputs[0]),
                                    Tensor(call.inputs[1]),
                                    Tensor(call.inputs[2]),
                                    Tensor(call.inputs[3]),
                                    Tensor(call.inputs[4]),
                                    e,
                                    training};
  return Launched(LaunchRows(device.ctx, f, e.channels, e.count),
                  "batch_norm_backward");
}

}  // namespace mixrt::gpu
