// A plugin-ABI tensor descriptor of host memory, for tests that call a
// plugin's kernels directly. The descriptor points at `shape` and
// `strides`: they must outlive it.
#ifndef MIXRT_TESTS_TESTING_TENSOR_DESC_H_
#define MIXRT_TESTS_TESTING_TENSOR_DESC_H_

#include <cstdint>
#include <vector>

#include "mixrt/plugin_api.h"

namespace mixrt::testing {

inline MixrtTensorDesc HostDesc(void* data, MixrtDtype dtype,
                                const std::vector<int64_t>& shape,
                                const std::vector<int64_t>& strides) {
  MixrtTensorDesc d{};
  d.struct_size = sizeof(d);
  d.data = data;
  d.dtype = dtype;
  d.ndim = static_cast<int32_t>(shape.size());
  d.shape = shape.data();
  d.strides = strides.data();
  return d;
}

}  // namespace mixrt::testing

#endif  // MIXRT_TESTS_TESTING_TENSOR_DESC_H_
