// A seeded source of random tensors. Numbers come from the counter-based
// Philox generator specified in plugin_api.h, so a seed gives the same tensor
// on every backend. Each draw advances the generator's offset; thread-safe.
#ifndef MIXRT_CORE_TENSOR_GENERATOR_H_
#define MIXRT_CORE_TENSOR_GENERATOR_H_

#include <atomic>
#include <cstdint>

namespace mixrt {

// Tells this thread's capture hooks (capture_hooks.h), if any, that random
// numbers were drawn.
void ReportRandomDraw();

class Generator {
 public:
  explicit Generator(uint64_t seed = 0) : seed_(seed), offset_(0) {}

  uint64_t seed() const { return seed_; }
  uint64_t offset() const { return offset_.load(); }
  void manual_seed(uint64_t seed) {
    seed_ = seed;
    offset_ = 0;
  }
  // Reserves Philox blocks for `numel` values; returns the starting offset.
  // Inside a compiled function's trace, a draw from any generator is a
  // graph break: a replay would repeat this draw's numbers.
  uint64_t Reserve(int64_t numel) {
    ReportRandomDraw();
    return offset_.fetch_add((static_cast<uint64_t>(numel) + 3) / 4);
  }
  // Restores a state captured with seed()/offset() (e.g. from a checkpoint).
  void set_state(uint64_t seed, uint64_t offset) {
    seed_ = seed;
    offset_ = offset;
  }

 private:
  uint64_t seed_;
  std::atomic<uint64_t> offset_;
};

// The process-wide default generator (seed 0 until manual_seed).
Generator& DefaultGenerator();
inline void manual_seed(uint64_t seed) { DefaultGenerator().manual_seed(seed); }

}  // namespace mixrt

#endif  // MIXRT_CORE_TENSOR_GENERATOR_H_
