// What the conformance case groups share: the float dtypes, the seed, the
// shape variants of pointwise ops, tolerance and output helpers.
#ifndef MIXRT_PLUGINS_CONFORMANCE_CASE_UTIL_H_
#define MIXRT_PLUGINS_CONFORMANCE_CASE_UTIL_H_

#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "plugins/conformance/conformance_cases.h"
#include "plugins/conformance/conformance_harness.h"

namespace mixrt::conformance {

inline constexpr DType kFloatTypes[] = {DType::kF32, DType::kF16, DType::kBF16};
inline constexpr uint64_t kSeed = 2024;

using Outputs = absl::StatusOr<std::vector<Tensor>>;

// One output as the harness's list.
Outputs One(absl::StatusOr<Tensor> t);
// The same tolerance for every output.
ToleranceFn Fixed(Tolerance t);
// Shape variants for pointwise ops: name -> input specs (before dtype).
std::vector<std::pair<std::string, std::vector<InputSpec>>> BinaryShapes();
// `specs` with every non-label input in `dtype`.
std::vector<InputSpec> WithDtype(std::vector<InputSpec> specs, DType dtype);
// Whether the device's plugin has the fused attention op (ABI 1.1); the
// host composes it from other ops where it does not.
bool HasFusedAttention(const Device& device);

// Each group appends its cases (conformance_cases_<group>.cc).
void AddPointwiseCases(std::vector<Case>* cases);
void AddCastCases(std::vector<Case>* cases);
void AddReduceCases(std::vector<Case>* cases);
void AddMatmulCases(std::vector<Case>* cases);
void AddSoftmaxNormCases(std::vector<Case>* cases);
void AddLossCases(std::vector<Case>* cases);
void AddOptimizerCases(std::vector<Case>* cases);
void AddConvPoolCases(std::vector<Case>* cases);
void AddBatchNormEmbeddingCases(std::vector<Case>* cases);
void AddRegressionLossCases(std::vector<Case>* cases);
void AddAttentionCases(std::vector<Case>* cases);
void AddFusionCases(std::vector<Case>* cases);

}  // namespace mixrt::conformance

#endif  // MIXRT_PLUGINS_CONFORMANCE_CASE_UTIL_H_
