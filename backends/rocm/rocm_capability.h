// What an AMD GPU can do for each op class and dtype: a pure function of its
// gfx architecture name and of the code objects this plugin was built with,
// tested on machines without a GPU.
#ifndef MIXRT_BACKENDS_ROCM_ROCM_CAPABILITY_H_
#define MIXRT_BACKENDS_ROCM_ROCM_CAPABILITY_H_

#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "mixrt/plugin_api.h"
#include "plugins/sdk/plugin.h"

namespace mixrt::rocm {

// "gfx90a:sramecc+:xnack-" -> "gfx90a".
std::string BaseArchitecture(absl::string_view gcn_arch_name);

enum class GfxFamily { kUnknown, kGcn, kCdna1, kCdna2, kCdna3, kRdna2, kRdna3 };
GfxFamily FamilyOf(absl::string_view arch);
absl::string_view FamilyName(GfxFamily family);

// Matrix cores: MFMA on CDNA (f16 from CDNA1, bf16 at full rate from
// CDNA2), WMMA on RDNA3. Wavefronts are 64 lanes on GCN/CDNA, 32 on RDNA.
struct GfxFeatures {
  bool matrix_cores = false;
  bool bf16_matrix = false;
  int wavefront = 64;
};
GfxFeatures FeaturesOf(GfxFamily family);

// The --offload-arch list of this build (from backends/rocm/BUILD).
const std::vector<std::string>& BuiltArchitectures();

sdk::Capability RocmCapability(absl::string_view gcn_arch_name,
                               const std::vector<std::string>& built,
                               MixrtOpClass op_class, MixrtDtype dtype);

}  // namespace mixrt::rocm

#endif  // MIXRT_BACKENDS_ROCM_ROCM_CAPABILITY_H_
