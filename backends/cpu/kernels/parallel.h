// Splitting loops over the plugin's threads (OpenMP, shared with oneDNN, so
// OMP_NUM_THREADS and MIXRT_NUM_THREADS govern both).
#ifndef MIXRT_BACKENDS_CPU_KERNELS_PARALLEL_H_
#define MIXRT_BACKENDS_CPU_KERNELS_PARALLEL_H_

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

// As ParallelFor, but ranges of `chunk` items are handed to whichever
// thread is free next, for loops of many similar tasks where one thread
// may fall behind (another process on its core): fn(begin, end) is called
// once per chunk.
template <typename Fn>
void ParallelForChunks(int64_t n, int64_t chunk, Fn&& fn) {
  if (n <= 0) return;
  const int64_t chunks = (n + chunk - 1) / chunk;
  const int threads =
      static_cast<int>(std::min<int64_t>(omp_get_max_threads(), chunks));
  if (threads <= 1) {
    fn(int64_t{0}, n);
    return;
  }
#pragma omp parallel for num_threads(threads) schedule(dynamic, 1)
  for (int64_t c = 0; c < chunks; ++c) {
    fn(c * chunk, std::min(n, (c + 1) * chunk));
  }
}

// Items per range so that each range holds at least ~16K elements of
// work: waking a thread and joining it costs what that much simple work
// takes. A fixed count of rows or channels forked tiny problems (a 32 x 10
// cross entropy on two threads took 10 us, a fifth of a small train step).
constexpr int64_t kParallelWork = int64_t{1} << 14;
inline int64_t GrainFor(int64_t work_per_item) {
  return std::max<int64_t>(1,
                           kParallelWork / std::max<int64_t>(1, work_per_item));
}

// Work this small runs on the calling thread: waking the other threads
// and joining them costs more than it saves (a 32 x 64 x 64 matmul took
// 6 us on oneDNN's two threads).
constexpr int64_t kSerialWork = int64_t{1} << 18;  // Multiply-adds.

// While alive, OpenMP regions opened by this thread (oneDNN's included)
// run on it alone; a oneDNN primitive must be created and run under the
// same thread count, so callers use one for both.
class SerialScope {
 public:
  explicit SerialScope(bool serial = true)
      : saved_(serial ? omp_get_max_threads() : 0) {
    if (saved_ > 1) omp_set_num_threads(1);
  }
  ~SerialScope() {
    if (saved_ > 1) omp_set_num_threads(saved_);
  }
  SerialScope(const SerialScope&) = delete;
  SerialScope& operator=(const SerialScope&) = delete;

 private:
  int saved_;
};

}  // namespace mixrt::cpu

#endif  // MIXRT_BACKENDS_CPU_KERNELS_PARALLEL_H_
