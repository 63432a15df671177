// conv2d (forward, backward data, backward weights) and pool2d.
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "backends/gpu/conv_pool_functors.h"
#include "backends/gpu/gpu_ops.h"
#include "mixrt/status_macros.h"

namespace mixrt::gpu {
namespace {

absl::StatusOr<ConvGeometry> Geometry(const sdk::KernelCall& call,
                                      const sdk::TensorRef& x,
                                      const sdk::TensorRef& weight,
                                      const sdk::TensorRef& y) {
  MIXRT_ASSIGN_OR_RETURN(auto attrs, call.GetAttrs<MixrtConvAttrs>());
  const MixrtConvAttrs& a = *attrs;
  if (x.ndim() != 4 || weight.ndim() != 4 || y.ndim() != 4 || a.groups < 1) {
    return absl::InvalidArgumentError("conv2d takes 4-d NCHW tensors");
  }
  ConvGeometry g;
  g.n = x.dim(0), g.c = x.dim(1), g.h = x.dim(2), g.w = x.dim(3);
  g.o = weight.dim(0), g.kh = weight.dim(2), g.kw = weight.dim(3);
  g.ho = y.dim(2), g.wo = y.dim(3), g.groups = a.groups;
  if (g.c % g.groups != 0 || g.o % g.groups != 0 ||
      weight.dim(1) != g.c / g.groups || y.dim(0) != g.n || y.dim(1) != g.o) {
    return absl::InvalidArgumentError("conv2d: channel counts do not match");
  }
  for (int d = 0; d < 2; ++d) {
    if (a.stride[d] < 1 || a.dilation[d] < 1 || a.padding[d] < 0) {
      return absl::InvalidArgumentError(
          "conv2d: strides and dilations must be >= 1, padding >= 0");
    }
    g.stride[d] = a.stride[d];
    g.padding[d] = a.padding[d];
    g.dilation[d] = a.dilation[d];
  }
  g.cg = g.c / g.groups;
  g.og = g.o / g.groups;
  return g;
}

absl::Status Conv(GpuDevice& device, const sdk::KernelCall& call) {
  MIXRT_ASSIGN_OR_RETURN(auto attrs, call.GetAttrs<MixrtConvAttrs>());
  switch (call.op) {
    case MIXRT_OP_CONV2D: {
      MIXRT_RETURN_IF_ERROR(ExpectArity(call, 2, 3, 1));
      MIXRT_ASSIGN_OR_RETURN(auto g, Geometry(call, call.inputs[0],
                                              call.inputs[1], call.outputs[0]));
      const bool bias = call.inputs.size() == 3;
      const ConvForwardFunctor f{Tensor(call.outputs[0]),
                                 Tensor(call.inputs[0]),
                                 Tensor(call.inputs[1]),
                                 bias ? Tensor(call.inputs[2]) : DeviceTensor(),
                                 bias,
                                 attrs->activation,
                                 g};
      return Launched(LaunchElementwise(device.ctx, f, f.y.numel), "conv2d");
    }
    case MIXRT_OP_CONV2D_BACKWARD_DATA: {
      MIXRT_RETURN_IF_ERROR(ExpectArity(call, 2, 2, 1));
      MIXRT_ASSIGN_OR_RETURN(auto g, Geometry(call, call.outputs[0],
                                              call.inputs[1], call.inputs[0]));
      const ConvBackwardDataFunctor f{Tensor(call.outputs[0]),
                                      Tensor(call.inputs[0]),
                                      Tensor(call.inputs[1]), g};
      return Launched(LaunchElementwise(device.ctx, f, f.grad_x.numel),
                      "conv2d_backward_data");
    }
    default: {
      if (call.inputs.size() != 2 || call.outputs.empty() ||
          call.outputs.size() > 2) {
        return absl::InvalidArgumentError(
            "conv2d_backward_weights takes (grad_out, x) and (grad_w[, "
            "grad_b])");
      }
      MIXRT_ASSIGN_OR_RETURN(auto g, Geometry(call, call.inputs[1],
                                              call.outputs[0], call.inputs[0]));
      const bool bias = call.outputs.size() == 2;
      ConvBackwardWeightsRows f{Tensor(call.outputs[0]),
                                bias ? Tensor(call.outputs[1]) : DeviceTensor(),
                                Tensor(call.inputs[0]),
                                Tensor(call.inputs[1]),
                                g,
                                false};
      const int64_t outputs = g.n * g.ho * g.wo;
      if (absl::Status s =
              Launched(LaunchRows(device.ctx, f, f.grad_weight.numel, outputs),
                       "conv2d_backward_weights");
          !s.ok() || !bias) {
        return s;
      }
      f.bias_only = true;
      return Launched(LaunchRows(device.ctx, f, g.o, outputs),
                      "conv2d_backward_weights (bias)");
    }
  }
}

absl::Status Pool(GpuDevice& device, const sdk::KernelCall& call) {
  const bool backward = call.op == MIXRT_OP_POOL2D_BACKWARD;
  const size_t inputs = backward ? 2 : 1;
  MIXRT_RETURN_IF_ERROR(ExpectArity(call, inputs, inputs, 1));
  MIXRT_ASSIGN_OR_RETURN(auto attrs, call.GetAttrs<MixrtPoolAttrs>());
  const MixrtPoolAttrs& a = *attrs;
  const sdk::TensorRef& x = call.inputs[backward ? 1 : 0];
  const sdk::TensorRef& y = backward ? call.inputs[0] : call.outputs[0];
  if (x.ndim() != 4 || y.ndim() != 4) {
    return absl::InvalidArgumentError("pool2d takes 4-d NCHW tensors");
  }
  PoolGeometry g;
  g.n = x.dim(0), g.c = x.dim(1), g.h = x.dim(2), g.w = x.dim(3);
  g.ho = y.dim(2), g.wo = y.dim(3);
  g.max = a.kind == MIXRT_POOL_MAX;
  for (int d = 0; d < 2; ++d) {
    if (a.kernel[d] < 1 || a.stride[d] < 1 || a.padding[d] < 0) {
      return absl::InvalidArgumentError(
          "pool2d: kernel and stride must be >= 1, padding >= 0");
    }
    g.kernel[d] = a.kernel[d];
    g.stride[d] = a.stride[d];
    g.padding[d] = a.padding[d];
  }
  if (!backward) {
    const PoolForwardFunctor f{Tensor(y), Tensor(x), g};
    return Launched(LaunchElementwise(device.ctx, f, f.y.numel), "pool2d");
  }
  const PoolBackwardFunctor f{Tensor(call.outputs[0]), Tensor(y), Tensor(x), g};
  return Launched(LaunchElementwise(device.ctx, f, f.grad_x.numel),
                  "pool2d_backward");
}

}  // namespace

absl::Status RunConvPool(GpuDevice& device, const sdk::KernelCall& call) {
  if (call.op == MIXRT_OP_POOL2D || call.op == MIXRT_OP_POOL2D_BACKWARD) {
    return Pool(device, call);
  }
  return Conv(device, call);
}

}  // namespace mixrt::gpu
