// Deterministic floats uniform in [-2, 2) for the CPU plugin's kernel
// tests, which link the plugin's kernels and not the core (no tensors, no
// generators): a 32-bit LCG, the top 24 bits of each state.
#ifndef MIXRT_TESTS_TESTING_UNIFORM_FLOATS_H_
#define MIXRT_TESTS_TESTING_UNIFORM_FLOATS_H_

#include <cstdint>
#include <vector>

namespace mixrt::testing {

inline std::vector<float> UniformFloats(int64_t n, uint32_t seed) {
  std::vector<float> v(n);
  for (int64_t i = 0; i < n; ++i) {
    seed = seed * 1664525u + 1013904223u;
    v[i] = static_cast<float>(seed >> 8) / (1 << 24) * 4.0f - 2.0f;
  }
  return v;
}

}  // namespace mixrt::testing

#endif  // MIXRT_TESTS_TESTING_UNIFORM_FLOATS_H_
