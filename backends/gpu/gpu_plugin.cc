#include "backends/gpu/gpu_plugin.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "backends/gpu/gpu_ops.h"
#include "mixrt/status_macros.h"

namespace mixrt::gpu {

sdk::Status RuntimeStatus(rt::Error error, const char* call) {
  if (error == rt::kSuccess) return sdk::OkStatus();
  // Clear the last error so the next launch reports its own.
  (void)rt::GetLastError();
  const std::string text = rt::Describe(call, error);
  if (rt::IsOutOfMemory(error)) return sdk::ResourceExhaustedError(text);
  return sdk::InternalError(text);
}

sdk::StatusOr<void*> GpuDevice::Scratch(size_t bytes) {
  if (bytes <= scratch_bytes) return scratch;
  if (scratch != nullptr) {
    MIXRT_RETURN_IF_ERROR(RuntimeStatus(rt::Free(scratch), "Free (scratch)"));
    scratch = nullptr;
    scratch_bytes = 0;
  }
  if (sdk::Status s =
          RuntimeStatus(rt::Malloc(&scratch, bytes), "Malloc (scratch)");
      !s.ok()) {
    return s;
  }
  scratch_bytes = bytes;
  return scratch;
}

int32_t ScoreByDeviceCount() {
  int count = 0;
  if (rt::GetDeviceCount(&count) != rt::kSuccess) {
    (void)rt::GetLastError();
    return 0;
  }
  return count > 0 ? 200 : 0;
}

sdk::Status GpuPlugin::Initialize() {
  int count = 0;
  // On error the runtime may leave `count` as it was (CUDA 13 without a
  // driver does): the error code decides, never the count.
  const rt::Error error = rt::GetDeviceCount(&count);
  if (error != rt::kSuccess) {
    no_device_reason_ = rt::Describe(rt::kGetDeviceCount, error);
    (void)rt::GetLastError();
    return sdk::OkStatus();
  }
  if (count == 0) {
    no_device_reason_ =
        absl::StrCat("the ", rt::kRuntime, " runtime reports 0 devices");
    return sdk::OkStatus();
  }
  for (int i = 0; i < count; ++i) {
    auto device = std::make_unique<GpuDevice>();
    device->index = i;
    MIXRT_RETURN_IF_ERROR(RuntimeStatus(rt::SetDevice(i), "SetDevice"));
    MIXRT_RETURN_IF_ERROR(RuntimeStatus(
        rt::GetDeviceProperties(&device->props, i), "GetDeviceProperties"));
    if (sdk::Status s =
            RuntimeStatus(rt::StreamCreate(&device->stream), "StreamCreate");
        !s.ok()) {
      return s;
    }
    void* flag = nullptr;
    if (sdk::Status s =
            RuntimeStatus(rt::Malloc(&flag, sizeof(int32_t)), "Malloc");
        !s.ok()) {
      return s;
    }
    device->bad_input = static_cast<int32_t*>(flag);
    device->ctx.stream = device->stream;
    device->ctx.limits.multiprocessors = device->props.multiProcessorCount;
    device->ctx.limits.warp_size = device->props.warpSize;
    device->ctx.limits.max_threads_per_block = device->props.maxThreadsPerBlock;
    MIXRT_RETURN_IF_ERROR(InitializeDevice(*device));
    devices_.push_back(std::move(device));
  }
  return sdk::OkStatus();
}

sdk::Status GpuPlugin::Shutdown() {
  // Best effort: the process is letting the plugin go, and a failure here
  // has nobody left to act on it.
  for (auto& device : devices_) {
    (void)rt::SetDevice(device->index);
    (void)rt::StreamSynchronize(device->stream);
    (void)rt::Free(device->bad_input);
    (void)rt::Free(device->scratch);
    (void)rt::StreamDestroy(device->stream);
  }
  devices_.clear();
  return sdk::OkStatus();
}

sdk::DeviceCount GpuPlugin::CountDevices() {
  return {static_cast<int>(devices_.size()), no_device_reason_};
}

sdk::StatusOr<GpuDevice*> GpuPlugin::Enter(int device) {
  if (device < 0 || device >= static_cast<int>(devices_.size())) {
    return sdk::InvalidArgumentError(absl::StrCat(
        "device ", device, " does not exist (", devices_.size(), " present)"));
  }
  MIXRT_RETURN_IF_ERROR(RuntimeStatus(rt::SetDevice(device), "SetDevice"));
  return devices_[device].get();
}

sdk::StatusOr<sdk::DeviceProperties> GpuPlugin::GetDeviceProperties(
    int device) {
  MIXRT_ASSIGN_OR_RETURN(auto d, Enter(device));
  sdk::DeviceProperties p;
  p.name = DeviceName(*d);
  p.total_memory = d->props.totalGlobalMem;
  // Contiguous inputs keep the kernels' index math to a multiply-add and let
  // the BLAS see plain leading dimensions.
  p.flags = MIXRT_DEVICE_FLAG_NEEDS_CONTIGUOUS;
  if (HasMatrixUnits(*d)) p.flags |= MIXRT_DEVICE_FLAG_TENSOR_CORES;
  if (MatmulTakesTransposedOperands()) {
    p.flags |= MIXRT_DEVICE_FLAG_MATMUL_TRANSPOSED_OPERANDS;
  }
  p.alignment = 256;
  return p;
}

sdk::StatusOr<void*> GpuPlugin::Allocate(int device, uint64_t bytes) {
  MIXRT_RETURN_IF_ERROR(Enter(device).status());
  if (bytes == 0) return nullptr;
  void* ptr = nullptr;
  MIXRT_RETURN_IF_ERROR(RuntimeStatus(rt::Malloc(&ptr, bytes), "Malloc"));
  return ptr;
}

sdk::Status GpuPlugin::Free(int device, void* ptr) {
  MIXRT_RETURN_IF_ERROR(Enter(device).status());
  return RuntimeStatus(rt::Free(ptr), "Free");
}

sdk::Status GpuPlugin::Copy(int device, MixrtCopyKind kind, void* dst,
                            const void* src, uint64_t bytes) {
  MIXRT_ASSIGN_OR_RETURN(auto d, Enter(device));
  if (kind > MIXRT_COPY_DEVICE_TO_DEVICE) {
    return sdk::InvalidArgumentError(absl::StrCat("unknown copy kind ", kind));
  }
  if (bytes == 0) return sdk::OkStatus();
  MIXRT_RETURN_IF_ERROR(RuntimeStatus(
      rt::MemcpyAsync(dst, src, bytes, kind, d->stream), "MemcpyAsync"));
  // The ABI: a copy to the host returns when the data are there.
  if (kind == MIXRT_COPY_DEVICE_TO_HOST) {
    return RuntimeStatus(rt::StreamSynchronize(d->stream), "StreamSynchronize");
  }
  return sdk::OkStatus();
}

sdk::Status GpuPlugin::Memset(int device, void* dst, uint8_t value,
                              uint64_t bytes) {
  MIXRT_ASSIGN_OR_RETURN(auto d, Enter(device));
  if (bytes == 0) return sdk::OkStatus();
  return RuntimeStatus(rt::MemsetAsync(dst, value, bytes, d->stream),
                       "MemsetAsync");
}

sdk::Status GpuPlugin::Synchronize(int device) {
  MIXRT_ASSIGN_OR_RETURN(auto d, Enter(device));
  return RuntimeStatus(rt::StreamSynchronize(d->stream), "StreamSynchronize");
}

sdk::Status GpuPlugin::Launch(const sdk::KernelCall& call) {
  MIXRT_ASSIGN_OR_RETURN(auto d, Enter(call.device));
  if (call.op == MIXRT_OP_MATMUL) return Matmul(*d, call);
  return RunOp(*d, call);
}

}  // namespace mixrt::gpu
