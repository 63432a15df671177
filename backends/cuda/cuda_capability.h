// What a CUDA device can do for each op class and dtype: a pure function of
// its compute capability and of the architectures this plugin was built
// for, so the whole table is tested on machines without a GPU.
#ifndef MIXRT_BACKENDS_CUDA_CUDA_CAPABILITY_H_
#define MIXRT_BACKENDS_CUDA_CUDA_CAPABILITY_H_

#include <string>
#include <vector>

#include "mixrt/plugin_api.h"
#include "plugins/sdk/plugin.h"

namespace mixrt::cuda {

struct ComputeCapability {
  int major = 0;
  int minor = 0;
  int sm() const { return major * 10 + minor; }
};

// Tensor-core generations: f16 from Volta (sm_70), bf16 and TF32 from
// Ampere (sm_80), fp8 from Ada (sm_89).
struct TensorCoreFeatures {
  bool f16 = false;
  bool bf16 = false;
  bool tf32 = false;
  bool fp8 = false;
};
TensorCoreFeatures TensorCoresOf(ComputeCapability cc);

// The code objects in the plugin: SASS per listed sm (it runs on devices of
// the same major version with an equal or higher minor) and PTX for one
// virtual architecture (JIT-compiled on that one and every later one).
struct CudaBuildTargets {
  std::vector<int> sass;  // e.g. {75, 80, 90}
  int ptx = 0;            // e.g. 90; 0: none.
};
// The targets this plugin was compiled for (from backends/cuda/BUILD).
const CudaBuildTargets& BuiltTargets();
bool HasKernelImage(ComputeCapability cc, const CudaBuildTargets& targets);
std::string DescribeTargets(const CudaBuildTargets& targets);

struct MatmulSettings {
  // torch.set_float32_matmul_precision("high"): f32 matmuls may use TF32.
  bool allow_tf32 = false;
};

sdk::Capability CudaCapability(ComputeCapability cc,
                               const CudaBuildTargets& targets,
                               const MatmulSettings& settings,
                               MixrtOpClass op_class, MixrtDtype dtype);

// The precisions beyond the storage dtypes (ABI 1.2): TF32 in matmuls on
// TF32 tensor cores (what an f32 matmul uses under matmul precision
// "high"); fp8 nowhere yet: the hardware has it from sm_89, this plugin
// has no fp8 kernels.
sdk::Capability CudaPrecisionSupport(ComputeCapability cc,
                                     MixrtOpClass op_class,
                                     MixrtPrecision precision);

}  // namespace mixrt::cuda

#endif  // MIXRT_BACKENDS_CUDA_CUDA_CAPABILITY_H_
