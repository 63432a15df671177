// Sums in double over eight running sums, in a fixed order (the result does
// not depend on threads or ISA): one sum's chain of dependent adds costs 4
// cycles per element, which made layer_norm, its backward and
// multi_tensor_norm several percent of a GPT step. (The reduce kernel's
// order, which fused and generated loops repeat, is sdk/reduction_order.h.)
#ifndef MIXRT_BACKENDS_CPU_KERNELS_LANE_SUMS_H_
#define MIXRT_BACKENDS_CPU_KERNELS_LANE_SUMS_H_

#include <cstdint>

namespace mixrt::cpu {

// The sum of f(i) for i in [0, n).
template <typename Term>
double SumInLanes(int64_t n, Term&& f) {
  double lanes[8] = {};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    for (int j = 0; j < 8; ++j) lanes[j] += f(i + j);
  }
  double sum = 0;
  for (; i < n; ++i) sum += f(i);
  for (double l : lanes) sum += l;
  return sum;
}

}  // namespace mixrt::cpu

#endif  // MIXRT_BACKENDS_CPU_KERNELS_LANE_SUMS_H_
