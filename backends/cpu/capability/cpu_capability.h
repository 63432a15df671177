// The CPU plugin's precision capability matrix, detected at load: which
// dtypes each op class runs, from oneDNN's effective ISA, whether it can
// create the primitive, and the measured speed of lower-precision matmul.
// Ordered like oneDNN's implementation lists: oneDNN native first, then the
// plugin's own f32-compute fallback, then unsupported.
#ifndef MIXRT_BACKENDS_CPU_CAPABILITY_CPU_CAPABILITY_H_
#define MIXRT_BACKENDS_CPU_CAPABILITY_CPU_CAPABILITY_H_

#include <array>

#include "backends/cpu/capability/matmul_speed_probe.h"
#include "plugins/sdk/plugin.h"

namespace mixrt::cpu {

// Lower-precision matmul measured slower than this fraction of f32 is
// reported as slow: autocast would make training slower, not faster.
inline constexpr double kSlowerThanF32 = 0.95;

class CapabilityTable {
 public:
  CapabilityTable() = default;
  static CapabilityTable Detect(const MatmulSpeeds& speeds);

  const sdk::Capability& Get(MixrtOpClass op_class, MixrtDtype dtype) const {
    return table_[op_class][dtype];
  }

 private:
  std::array<std::array<sdk::Capability, MIXRT_DTYPE_COUNT>,
             MIXRT_OP_CLASS_COUNT>
      table_;
};

}  // namespace mixrt::cpu

#endif  // MIXRT_BACKENDS_CPU_CAPABILITY_CPU_CAPABILITY_H_
