// The table of conformance cases: every op of the ABI, every float dtype,
// awkward shapes (batch 513, sizes not multiples of 8, 0 and 1 elements,
// broadcasting, transposed operands) and awkward values (wide magnitudes,
// NaN and infinities).
#ifndef MIXRT_PLUGINS_CONFORMANCE_CONFORMANCE_CASES_H_
#define MIXRT_PLUGINS_CONFORMANCE_CONFORMANCE_CASES_H_

#include <functional>
#include <string>
#include <vector>

#include "mixrt/plugin_api.h"
#include "plugins/conformance/conformance_harness.h"

namespace mixrt::conformance {

struct Case {
  std::string name;       // "binary/add/broadcast"
  MixrtOpClass op_class;  // Whose capability gates it.
  DType dtype;            // The dtype the capability is checked for.
  std::function<void(const Devices&)> run;
};

std::vector<Case> AllCases();

}  // namespace mixrt::conformance

#endif  // MIXRT_PLUGINS_CONFORMANCE_CONFORMANCE_CASES_H_
