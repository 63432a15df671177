// Every mixrt op that PyTorch also has, callable by its name with floating
// inputs of one dtype: what the autocast golden test and the policy-table
// test run. The shapes match tools/golden/autocast_dtypes.py.
#ifndef MIXRT_TESTS_AMP_AUTOCAST_OPS_H_
#define MIXRT_TESTS_AMP_AUTOCAST_OPS_H_

#include <functional>
#include <map>
#include <string>

#include "absl/status/statusor.h"
#include "core/plugin/device.h"
#include "core/tensor/tensor.h"

namespace mixrt::testing {

using AutocastOpCall =
    std::function<absl::StatusOr<Tensor>(const Device&, DType input_dtype)>;

// Op name (mixrt's function name; pool2d appears as max_pool2d and
// avg_pool2d, PyTorch's names) -> the call.
const std::map<std::string, AutocastOpCall>& AutocastOps();

}  // namespace mixrt::testing

#endif  // MIXRT_TESTS_AMP_AUTOCAST_OPS_H_
