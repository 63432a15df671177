// Every op of the ABI but matmul on a GPU device, through the shared kernels.
#ifndef MIXRT_BACKENDS_GPU_GPU_OPS_H_
#define MIXRT_BACKENDS_GPU_GPU_OPS_H_

#include "absl/status/status.h"
#include "backends/gpu/gpu_plugin.h"
#include "mixrt/status_macros.h"
#include "plugins/sdk/call_checks.h"
#include "plugins/sdk/plugin.h"

namespace mixrt::gpu {

absl::Status RunOp(GpuDevice& device, const sdk::KernelCall& call);

// Defined in the gpu_ops_*.cc files.
absl::Status RunReduce(GpuDevice& device, const sdk::KernelCall& call);
absl::Status RunMultiTensorNorm(GpuDevice& device, const sdk::KernelCall& call);
absl::Status RunSoftmax(GpuDevice& device, const sdk::KernelCall& call);
absl::Status RunLayerNorm(GpuDevice& device, const sdk::KernelCall& call);
absl::Status RunCrossEntropy(GpuDevice& device, const sdk::KernelCall& call);
absl::Status RunOptimizer(GpuDevice& device, const sdk::KernelCall& call);
absl::Status RunEmbedding(GpuDevice& device, const sdk::KernelCall& call);
absl::Status RunBatchNorm(GpuDevice& device, const sdk::KernelCall& call);
absl::Status RunConvPool(GpuDevice& device, const sdk::KernelCall& call);
absl::Status RunAttention(GpuDevice& device, const sdk::KernelCall& call);

// Helpers shared by the op files.
using sdk::ExpectArity;
using sdk::ExpectSameShapes;
inline DeviceTensor Tensor(const sdk::TensorRef& t) {
  return MakeDeviceTensor(*t.desc());
}
// A launcher's return code as a Status naming the kernel.
absl::Status Launched(int error, const char* kernel);
// Clears the device's bad-input flag, runs `launch` (which returns a
// launcher's code), then reads the flag back (this synchronizes): set means
// InvalidArgument(message).
template <typename Launch>
absl::Status LaunchCheckingInput(GpuDevice& device, const char* kernel,
                                 const char* message, Launch&& launch) {
  std::lock_guard<std::mutex> lock(device.bad_input_mutex);
  MIXRT_RETURN_IF_ERROR(RuntimeStatus(
      rt::MemsetAsync(device.bad_input, 0, sizeof(int32_t), device.stream),
      "MemsetAsync"));
  MIXRT_RETURN_IF_ERROR(Launched(launch(device.bad_input), kernel));
  int32_t bad = 0;
  MIXRT_RETURN_IF_ERROR(
      RuntimeStatus(rt::MemcpyAsync(&bad, device.bad_input, sizeof(bad),
                                    MIXRT_COPY_DEVICE_TO_HOST, device.stream),
                    "MemcpyAsync"));
  MIXRT_RETURN_IF_ERROR(
      RuntimeStatus(rt::StreamSynchronize(device.stream), "StreamSynchronize"));
  if (bad != 0) return absl::InvalidArgumentError(message);
  return absl::OkStatus();
}

}  // namespace mixrt::gpu

#endif  // MIXRT_BACKENDS_GPU_GPU_OPS_H_
