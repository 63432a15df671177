// libmixrt_rocm.so: AMD GPUs through HIP. Debian ships no rocBLAS, so
// matmul runs on the shared tiled GEMM kernel; everything else on the
// shared GPU kernels.
#include <hip/hip_runtime_api.h>

#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "backends/gpu/gpu_plugin.h"
#include "backends/gpu/matmul_call.h"
#include "backends/rocm/rocm_capability.h"
#include "mixrt/status_macros.h"

namespace mixrt::rocm {
namespace {

class RocmPlugin : public gpu::GpuPlugin {
 public:
  sdk::PluginInfo Info() const override {
    int runtime = 0;
    if (hipRuntimeGetVersion(&runtime) != hipSuccess) runtime = 0;
    return {"rocm", "0.1",
            // HIP_VERSION encoding: major * 10^7 + minor * 10^5 + patch.
            absl::StrCat("HIP runtime ", runtime / 10000000, ".",
                         runtime / 100000 % 100, ".", runtime % 100000,
                         ", own tiled GEMM, code for ",
                         absl::StrJoin(BuiltArchitectures(), ", ")),
            // PyTorch on ROCm keeps the "cuda" device type and its autocast
            // lists; so does mixrt.
            "cuda"};
  }

  sdk::Capability GetCapability(int device, MixrtOpClass op_class,
                                MixrtDtype dtype) override {
    auto d = Enter(device);
    if (!d.ok()) return {MIXRT_SUPPORT_UNSUPPORTED, "no such device", 0.0};
    return RocmCapability((*d)->props.gcnArchName, BuiltArchitectures(),
                          op_class, dtype);
  }

 protected:
  std::string DeviceName(const gpu::GpuDevice& device) const override {
    return absl::StrCat(device.props.name, " (",
                        BaseArchitecture(device.props.gcnArchName), ", ",
                        device.props.multiProcessorCount, " CUs)");
  }

  bool HasMatrixUnits(const gpu::GpuDevice& device) const override {
    return FeaturesOf(FamilyOf(BaseArchitecture(device.props.gcnArchName)))
        .matrix_cores;
  }

  sdk::Status Matmul(gpu::GpuDevice& device,
                     const sdk::KernelCall& call) override {
    MIXRT_ASSIGN_OR_RETURN(auto m, gpu::ParseMatmulCall(call));
    gpu::TiledGemm gemm;
    gemm.a = m.a;
    gemm.b = m.b;
    gemm.out = m.out;
    gemm.epilogue = m.epilogue;
    gemm.m = m.m;
    gemm.n = m.n;
    gemm.k = m.k;
    gemm.batch = m.batch;
    return gpu::RuntimeStatus(
        static_cast<hipError_t>(gpu::LaunchTiledGemm(device.ctx, gemm)),
        "tiled GEMM");
  }
};

}  // namespace
}  // namespace mixrt::rocm

MIXRT_SDK_DEFINE_PLUGIN(mixrt::rocm::RocmPlugin)
MIXRT_SDK_DEFINE_SCORE(mixrt::gpu::ScoreByDeviceCount)
