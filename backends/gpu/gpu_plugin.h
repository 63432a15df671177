// The part of a GPU backend plugin that CUDA and HIP share: device
// discovery (with the driver's own words when there is none), one stream
// per device, memory, and the dispatch of every op but matmul to the shared
// kernels. A backend subclasses it with its identity, capability table and
// matmul (cuBLASLt for CUDA, the tiled GEMM for ROCm).
#ifndef MIXRT_BACKENDS_GPU_GPU_PLUGIN_H_
#define MIXRT_BACKENDS_GPU_GPU_PLUGIN_H_

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "backends/gpu/gpu_launch.h"
#include "backends/gpu/gpu_runtime.h"
#include "plugins/sdk/plugin.h"

namespace mixrt::gpu {

struct GpuDevice {
  int index = 0;
  rt::DeviceProp props{};
  rt::Stream stream = nullptr;
  LaunchContext ctx;
  // One int on the device that kernels set on bad input (integer division
  // by zero, a class index out of range); guarded by bad_input_mutex.
  int32_t* bad_input = nullptr;
  std::mutex bad_input_mutex;
  // Grow-only scratch memory for multi-stage kernels. Hold scratch_mutex
  // from Scratch() until the kernels using it are enqueued: growing frees
  // the old buffer, which waits for the device to finish with it.
  std::mutex scratch_mutex;
  void* scratch = nullptr;
  size_t scratch_bytes = 0;
  sdk::StatusOr<void*> Scratch(size_t bytes);
};

class GpuPlugin : public sdk::Plugin {
 public:
  sdk::Status Initialize() override;
  sdk::Status Shutdown() override;
  sdk::DeviceCount CountDevices() override;
  sdk::StatusOr<sdk::DeviceProperties> GetDeviceProperties(int device) override;
  sdk::StatusOr<void*> Allocate(int device, uint64_t bytes) override;
  sdk::Status Free(int device, void* ptr) override;
  sdk::Status Copy(int device, MixrtCopyKind kind, void* dst, const void* src,
                   uint64_t bytes) override;
  sdk::Status Memset(int device, void* dst, uint8_t value,
                     uint64_t bytes) override;
  sdk::Status Synchronize(int device) override;
  sdk::Status Launch(const sdk::KernelCall& call) override;
  // Its kernels run every op of each class its capability table supports.
  sdk::Capability GetOpSupport(int device, const sdk::OpQuery& query) override {
    return OpSupportFromClassMatrix(device, query);
  }

 protected:
  // Makes `device` current on the calling thread and returns it.
  sdk::StatusOr<GpuDevice*> Enter(int device);
  // The device's name as reported, plus what this backend adds (e.g. the
  // compute capability).
  virtual std::string DeviceName(const GpuDevice& device) const = 0;
  virtual bool HasMatrixUnits(const GpuDevice& device) const = 0;
  // Whether Matmul reads transposed in0/in1 directly
  // (MIXRT_DEVICE_FLAG_MATMUL_TRANSPOSED_OPERANDS).
  virtual bool MatmulTakesTransposedOperands() const { return false; }
  virtual sdk::Status Matmul(GpuDevice& device,
                             const sdk::KernelCall& call) = 0;
  // Per-device setup after the stream exists (e.g. BLAS handles).
  virtual sdk::Status InitializeDevice(GpuDevice&) { return sdk::OkStatus(); }

 private:
  std::vector<std::unique_ptr<GpuDevice>> devices_;
  std::string no_device_reason_;
};

// The plugins' mixrt_plugin_score: 200 (ahead of the CPU plugin's 100) when
// the runtime reports a device, 0 when the driver or the device is missing,
// so the host moves on without the plugin.
int32_t ScoreByDeviceCount();

// A runtime error as a Status naming the call; OK for success.
sdk::Status RuntimeStatus(rt::Error error, const char* call);

}  // namespace mixrt::gpu

#endif  // MIXRT_BACKENDS_GPU_GPU_PLUGIN_H_
