// The order in which mixrt reduces a run of floats, written once: the CPU
// plugin's reduce kernel, its fused-loop interpreter and the loop emitter's
// generated host code all follow it, so a fused or generated reduction is
// the op-by-op result bit for bit. The build embeds this very file in every
// generated loop's prelude (loop_prelude_text, as Inductor embeds
// cpp_prefix.h), so nothing here is restated in string literals.
//
// The order: sums accumulate in double. Over leading or middle dims each
// column's accumulator takes the rows in order, in blocks of
// kReduceColumnBlock columns; over the innermost dims pieces of
// kReducePiece elements are summed in chunks of kReduceColumnBlock in
// eight double lanes (mx_sum_in_double) and the pieces added in order. The
// result does not depend on threads or ISA.
//
// It compiles in the plugin build and in generated host source, which
// includes nothing.
#ifndef MIXRT_PLUGINS_SDK_REDUCTION_ORDER_H_
#define MIXRT_PLUGINS_SDK_REDUCTION_ORDER_H_

namespace mixrt {
namespace sdk {
namespace element {

// Columns a column reduction's task covers; also the chunk of a row sum.
constexpr long long kReduceColumnBlock = 256;
// Elements of a row that one task sums separately before the pieces add.
constexpr long long kReducePiece = 1LL << 16;

// Sum of x[0, n) in double, in eight interleaved partial sums: one chain of
// dependent double adds ran at a quarter of an element per cycle (4 ms for
// the sum of a 2M-element attention output before its backward).
inline double mx_sum_in_double(const float* x, long long n) {
  double lanes[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  long long j = 0;
  for (; j + 8 <= n; j += 8) {
    for (int l = 0; l < 8; ++l) lanes[l] += x[j + l];
  }
  for (; j < n; ++j) lanes[j % 8] += x[j];
  return ((lanes[0] + lanes[1]) + (lanes[2] + lanes[3])) +
         ((lanes[4] + lanes[5]) + (lanes[6] + lanes[7]));
}

// The accumulators of sum (and mean), max and min, and how each takes a
// value; in max and min a NaN on either side propagates (v + acc).
inline double mx_sum_initial() { return 0.0; }
inline double mx_max_initial() { return -__builtin_huge_val(); }
inline double mx_min_initial() { return __builtin_huge_val(); }
inline double mx_sum_combine(double acc, double v) { return acc + v; }
inline double mx_max_combine(double acc, double v) {
  return (v != v || acc != acc) ? v + acc : (v > acc ? v : acc);
}
inline double mx_min_combine(double acc, double v) {
  return (v != v || acc != acc) ? v + acc : (v < acc ? v : acc);
}

}  // namespace element
}  // namespace sdk
}  // namespace mixrt

#endif  // MIXRT_PLUGINS_SDK_REDUCTION_ORDER_H_
