// Sums in double over eight running sums, in a fixed order (the result does
// not depend on threads or ISA): one sum's chain of dependent adds costs 4
// cycles per element, which made layer_norm, its backward and
// multi_tensor_norm several percent of a GPT step.
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

// Sum of x[0, n) in double, in eight interleaved partial sums (the
// reduce kernel's order, which fused loops repeat): one chain
// of dependent double adds ran at a quarter of an element per cycle (4 ms
// for the sum of a 2M-element attention output before its backward).
inline double SumInDouble(const float* x, int64_t n) {
  double lanes[8] = {};
  int64_t j = 0;
  for (; j + 8 <= n; j += 8) {
    for (int l = 0; l < 8; ++l) lanes[l] += x[j + l];
  }
  for (; j < n; ++j) lanes[j % 8] += x[j];
  return ((lanes[0] + lanes[1]) + (lanes[2] + lanes[3])) +
         ((lanes[4] + lanes[5]) + (lanes[6] + lanes[7]));
}

}  // namespace mixrt::cpu

#endif  // MIXRT_BACKENDS_CPU_KERNELS_LANE_SUMS_H_
