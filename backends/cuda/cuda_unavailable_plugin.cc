// libmixrt_cuda.so when this machine had no CUDA toolkit to build the real
// one (third_party/cuda_configure.bzl): a plugin that loads, reports no
// device and says why, so `mixrt info` and the test summary show the reason
// instead of the build failing.
#include "missing_reason.h"
#include "plugins/sdk/plugin.h"
#include "plugins/sdk/status.h"

namespace mixrt::cuda {

class CudaUnavailablePlugin : public sdk::HostMemoryPlugin {
 public:
  sdk::PluginInfo Info() const override {
    return {"cuda", "0.1", MIXRT_CUDA_MISSING_REASON, "cuda"};
  }
  sdk::DeviceCount CountDevices() override {
    return {0, MIXRT_CUDA_MISSING_REASON};
  }
  sdk::StatusOr<sdk::DeviceProperties> GetDeviceProperties(int) override {
    return sdk::NotFoundError(MIXRT_CUDA_MISSING_REASON);
  }
  sdk::Capability GetCapability(int, MixrtOpClass, MixrtDtype) override {
    return sdk::Unsupported(MIXRT_CUDA_MISSING_REASON);
  }
  sdk::Status Launch(const sdk::KernelCall&) override {
    return sdk::NotFoundError(MIXRT_CUDA_MISSING_REASON);
  }
};

}  // namespace mixrt::cuda

MIXRT_SDK_DEFINE_PLUGIN(mixrt::cuda::CudaUnavailablePlugin)
MIXRT_SDK_DEFINE_SCORE([] { return 0; })
