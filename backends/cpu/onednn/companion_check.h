// Whether the oneDNN 3.x companion (onednn3_companion.h) computes what it
// claims to. A library with the right entry points and version numbers can
// still answer every product with nothing (NaN, or c left as it was): its
// answers are checked before it is trusted and for each product shape it
// is first given, and a companion that disagrees is dropped with the
// reason, never used or reported as native.
//
// The check is for a broken or lying companion, not for precision: two
// correct oneDNNs differ only by their accumulation order (a few ulps of
// the sum of |a||b| terms), a liar by NaN, zeros or stale values. So an
// element disagrees when one side is NaN and the other not, or when they
// differ by more than 5% of the reference plus 0.1% of the largest
// reference magnitude (a bound no f32-accumulated product of f32, f16 or
// bf16 inputs comes near).
#ifndef MIXRT_BACKENDS_CPU_ONEDNN_COMPANION_CHECK_H_
#define MIXRT_BACKENDS_CPU_ONEDNN_COMPANION_CHECK_H_

#include <string>

#include "backends/cpu/onednn/prepared_matmul.h"
#include "backends/cpu/onednn3/companion_abi.h"

namespace mixrt::cpu {

// "" when `theirs` agrees with `reference`, both laid out as `c` (f32, f16
// or bf16); else the first element that disagrees, with both values.
std::string ProductDisagreement(const MatmulOperand& c, const void* reference,
                                const void* theirs);

// "" when `run` computes known 64x64x64 products (f32, f16 and bf16 inputs
// into f32) as a double-precision reference does; else what it got wrong.
// A product `run` says it cannot build is no disagreement.
std::string KnownProductsDisagreement(MixrtOneDnn3RunFn* run);

}  // namespace mixrt::cpu

#endif  // MIXRT_BACKENDS_CPU_ONEDNN_COMPANION_CHECK_H_
