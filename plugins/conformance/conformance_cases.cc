#include "plugins/conformance/conformance_cases.h"

#include "plugins/conformance/case_util.h"

namespace mixrt::conformance {

std::vector<Case> AllCases() {
  std::vector<Case> cases;
  AddPointwiseCases(&cases);
  AddCastCases(&cases);
  AddReduceCases(&cases);
  AddMatmulCases(&cases);
  AddSoftmaxNormCases(&cases);
  AddLossCases(&cases);
  AddOptimizerCases(&cases);
  AddConvPoolCases(&cases);
  AddBatchNormEmbeddingCases(&cases);
  AddRegressionLossCases(&cases);
  AddAttentionCases(&cases);
  AddFusionCases(&cases);
  return cases;
}

}  // namespace mixrt::conformance
