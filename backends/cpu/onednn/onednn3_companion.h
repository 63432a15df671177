// Which oneDNN runs a product the plugin hands to oneDNN: its own (Debian's
// 2.6.3) or the oneDNN 3.x companion library beside it
// (onednn3/companion_abi.h), chosen per product shape by timing both.
//
// MIXRT_CPU_ONEDNN picks the rule:
//   unset or "auto": on CPUs with AMX or avx512_fp16, where oneDNN 3.x has
//     kernels 2.6.3 lacks, each new product shape runs a few times on both
//     and keeps the faster; elsewhere the companion is not loaded (3.2 ran
//     every product at 2.6.3's speed on the AVX2 and AVX-512-BF16 kinds,
//     docs/performance.md).
//   "measure": that timing on any CPU (its tests).
//   "2": the plugin's own oneDNN only.
//   "3": the companion for every product it can take, on any CPU (its
//     tests, and machines where it is known to win).
// MIXRT_CPU_ONEDNN3_LIBRARY names the companion's path; else it is
// libmixrt_cpu_onednn3.so in the plugin's own directory. Either way it is
// loaded only from where no other user could have written it
// (common/trusted_path.h), and only if its calls reach oneDNN 3.x.
// A choice by timing can differ between runs, and the two oneDNNs round
// differently (equal within f32 accumulation, not bit for bit): "2" or "3"
// makes a run repeatable.
// Products the companion cannot take (weights packed for 2.x, a binary
// post-op) run on the plugin's own oneDNN under every rule.
#ifndef MIXRT_BACKENDS_CPU_ONEDNN_ONEDNN3_COMPANION_H_
#define MIXRT_BACKENDS_CPU_ONEDNN_ONEDNN3_COMPANION_H_

#include <cstdint>
#include <string>

#include "backends/cpu/onednn/prepared_matmul.h"

namespace mixrt::cpu {

// RunPreparedMatmul (without packed weights) on the oneDNN the rule above
// picks for the product. Throws dnnl::error when the plugin's own oneDNN
// cannot build it.
void RunProductOnChosenOneDnn(const MatmulShape& shape, const void* a,
                              const void* b, void* c, const void* bias,
                              const void* const* post_op_data);

// One line for `mixrt info`: the companion's oneDNN and the rule, or why it
// is not used.
std::string OneDnn3CompanionSummary();

// Whether the companion is loaded (the rule and the CPU allow it, and it
// loaded and checked out).
bool OneDnn3CompanionLoaded();

// Why the companion at `path` would not be used ("" when it would): not
// there, untrusted, not a companion, another ABI version, or its calls
// reaching another oneDNN. Loads it and unloads it again.
std::string OneDnn3CompanionRefusal(const std::string& path);

// The implementation the companion's oneDNN picks for a 64 x 64 x 64
// product of `dtype` operands into f32 ("brg:avx512_core_fp16"); "" when it
// has none or is not loaded.
const std::string& OneDnn3CompanionImplementation(MixrtDtype dtype);
// The companion's oneDNN version ("3.2.0"); "" when it is not loaded.
std::string OneDnn3CompanionVersion();

// Products run so far on each side, and product shapes timed (for tests
// and `mixrt info`).
struct ProductOneDnnCounts {
  int64_t on_own = 0, on_companion = 0, shapes_timed = 0;
};
ProductOneDnnCounts ProductOneDnnCountsSoFar();

}  // namespace mixrt::cpu

#endif  // MIXRT_BACKENDS_CPU_ONEDNN_ONEDNN3_COMPANION_H_
