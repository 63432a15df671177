// The conformance harness: runs one op on the plugin under test and on the
// reference plugin with identical inputs, and compares the results within
// tolerances derived from the result dtype.
//
// Tolerances (relative to the reference value, plus an absolute floor):
//   exact ops (add, mul, casts, ...): one rounding each side, 1 unit in the
//     last place of the result dtype: f32 2^-23, f16 2^-10, bf16 2^-7;
//   transcendental ops: 16 units of f32 (libm-class float math) plus that;
//   sums of n terms: n * 2^-23 * sum|terms| on top (f32 accumulation);
//   matmul: K * 2^-23 * (|A| |B|)_ij on top.
// The reference computes in double and rounds once, so it is within half a
// unit of the exact result; the plugin gets the rest of the budget.
#ifndef MIXRT_PLUGINS_CONFORMANCE_CONFORMANCE_HARNESS_H_
#define MIXRT_PLUGINS_CONFORMANCE_CONFORMANCE_HARNESS_H_

#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/plugin/device.h"
#include "core/tensor/op_fallback.h"
#include "core/tensor/tensor.h"
#include "gtest/gtest.h"

namespace mixrt::conformance {

// How inputs are drawn.
enum class Values {
  kNormal,    // N(0, 1)
  kPositive,  // |N(0, 1)| + 0.05, for log, sqrt, pow
  kWide,      // sign * 10^U(-30, 30): overflow and underflow in 16 bits
  kSpecial,   // cycles NaN, +inf, -inf, 0, -0, 1, -1 among normal values
  kLabels,    // integer class indices, for targets
};

struct InputSpec {
  std::vector<int64_t> shape;
  DType dtype = DType::kF32;
  Values values = Values::kNormal;
  bool transposed = false;    // Made non-contiguous by swapping the last dims.
  int64_t label_classes = 0;  // For kLabels.
};

struct Tolerance {
  double rtol = 0;
  double atol = 0;
  // Extra absolute error per element (e.g. from accumulation), or empty.
  std::vector<double> extra;
};

double UnitRoundoff(DType dtype);  // 2^-24, 2^-11, 2^-8
Tolerance ExactTolerance(DType dtype);
Tolerance TranscendentalTolerance(DType dtype);

using OpFn = std::function<absl::StatusOr<std::vector<Tensor>>(
    const std::vector<Tensor>& inputs)>;
// Tolerance for output `index` given the host values of the inputs.
using ToleranceFn = std::function<Tolerance(
    int index, const std::vector<std::vector<double>>& inputs)>;

struct Devices {
  Device plugin;
  Device reference;
};

// How a skipped case's message starts when the plugin does not run the op:
// the per-op table counts such cases as "not implemented".
inline constexpr char kNotImplemented[] = "not implemented: ";

// For cases that run ops on the plugin themselves: asserts that `status`
// is OK, or skips the case as not implemented when the host refused an op
// the plugin declares unsupported.
#define CONFORMANCE_ASSERT_RAN(status_expr)                    \
  do {                                                         \
    const absl::Status conformance_status_ = (status_expr);    \
    if (::mixrt::IsDeclaredUnsupported(conformance_status_)) { \
      GTEST_SKIP() << ::mixrt::conformance::kNotImplemented    \
                   << conformance_status_.message();           \
    }                                                          \
    ASSERT_TRUE(conformance_status_.ok())                      \
        << "plugin: " << conformance_status_;                  \
  } while (0)

// Whether CompareOp also times the op on both devices (the plugin matrix,
// `conformance --matrix=DIR`): the best of three runs after the checked
// one. Off by default: timing triples a run.
void SetTimeOps(bool on);

// What CompareOp records on the case (gtest test properties, read by the
// per-op table): the worst element's error as a fraction of its tolerance
// (0: bit for bit; above 1: a failure), its absolute error, and with
// SetTimeOps the microseconds per call on each device.
inline constexpr char kWorstErrorOfTolerance[] = "worst_error_of_tolerance";
inline constexpr char kWorstAbsoluteError[] = "worst_absolute_error";
inline constexpr char kPluginMicroseconds[] = "plugin_us";
inline constexpr char kReferenceMicroseconds[] = "reference_us";

// Builds the inputs on both devices (identical values), runs `op` on each,
// and compares every output. Failures are reported with gtest; an op the
// plugin declares unsupported skips the case as not implemented.
void CompareOp(const Devices& devices, const std::vector<InputSpec>& inputs,
               const OpFn& op, const ToleranceFn& tolerance, uint64_t seed);

// Host values drawn for `spec` (before rounding to its dtype).
std::vector<float> DrawValues(const InputSpec& spec, uint64_t seed);

}  // namespace mixrt::conformance

#endif  // MIXRT_PLUGINS_CONFORMANCE_CONFORMANCE_HARNESS_H_
