// Splitting loops over the plugin's threads (OpenMP, shared with oneDNN, so
// OMP_NUM_THREADS and MIXRT_NUM_THREADS govern both).
#ifndef MIXRT_BACKENDS_CPU_PARALLEL_H_
#define MIXRT_BACKENDS_CPU_PARALLEL_H_

#include <omp.h>

#include <algorithm>
#include <cstdint>

namespace mixrt::cpu {

// Calls fn(begin, end) on disjoint ranges covering [0, n); ranges hold at
// least `grain` items, so small loops stay on one thread.
template <typename Fn>
void ParallelFor(int64_t n, int64_t grain, Fn&& fn) {
  if (n <= 0) return;
  const int64_t chunks =
      std::min<int64_t>(omp_get_max_threads(), (n + grain - 1) / grain);
  if (chunks <= 1) {
    fn(int64_t{0}, n);
    return;
  }
#pragma omp parallel for num_threads(chunks) schedule(static)
  for (int64_t c = 0; c < chunks; ++c) {
    const int64_t begin = n * c / chunks;
    const int64_t end = n * (c + 1) / chunks;
    fn(begin, end);
  }
}

}  // namespace mixrt::cpu

#endif  // MIXRT_BACKENDS_CPU_PARALLEL_H_
