// A seeded source of random tensors. Numbers come from the counter-based
// Philox generator specified in plugin_api.h, so a seed gives the same tensor
// on every backend. Each draw advances the generator's offset; thread-safe.
#ifndef MIXRT_CORE_TENSOR_GENERATOR_H_
#define MIXRT_CORE_TENSOR_GENERATOR_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <utility>

namespace mixrt {

// Philox blocks holding `numel` values (four per block).
inline uint64_t PhiloxBlocks(int64_t numel) {
  return (static_cast<uint64_t>(numel) + 3) / 4;
}

class Generator {
 public:
  // The seed and offset, apart from the object: a compiled graph that
  // draws from a generator holds its state weakly, and draws from it on
  // every replay while it exists (core/compiler/random_draws.h).
  struct State {
    explicit State(uint64_t s) : seed(s), offset(0) {}
    std::atomic<uint64_t> seed;
    std::atomic<uint64_t> offset;
  };

  explicit Generator(uint64_t seed = 0)
      : state_(std::make_shared<State>(seed)) {}
  // One generator is one stream of numbers: a copy would draw the same.
  Generator(const Generator&) = delete;
  Generator& operator=(const Generator&) = delete;

  uint64_t seed() const { return state_->seed.load(); }
  uint64_t offset() const { return state_->offset.load(); }
  void manual_seed(uint64_t seed) { set_state(seed, 0); }
  // Reserves Philox blocks for `numel` values; returns the starting offset.
  // Inside a compiled function's trace the draw is recorded, so the graph
  // draws from this generator again on every replay.
  uint64_t Reserve(int64_t numel) { return ReserveBlocks(PhiloxBlocks(numel)); }
  uint64_t ReserveBlocks(uint64_t blocks);
  // Restores a state captured with seed()/offset() (e.g. from a checkpoint).
  void set_state(uint64_t seed, uint64_t offset) {
    state_->seed = seed;
    state_->offset = offset;
  }
  const std::shared_ptr<State>& state() const { return state_; }
  // Another handle on this generator's stream: the same seed and offset,
  // drawn from together (not a copy, which would repeat the numbers). What
  // a module that draws later keeps, so that it never reads a generator
  // its creator has destroyed: the stream lives while either handle does.
  std::shared_ptr<Generator> Share() const {
    return std::shared_ptr<Generator>(new Generator(state_));
  }

 private:
  explicit Generator(std::shared_ptr<State> state) : state_(std::move(state)) {}
  std::shared_ptr<State> state_;
};

// `blocks` Philox blocks from `state` (seed, first offset), reported to
// this thread's capture hooks (capture_hooks.h) as a draw.
struct Draw {
  uint64_t seed = 0;
  uint64_t offset = 0;
};
Draw ReserveBlocks(const std::shared_ptr<Generator::State>& state,
                   uint64_t blocks);

// The process-wide default generator (seed 0 until manual_seed).
Generator& DefaultGenerator();
inline void manual_seed(uint64_t seed) { DefaultGenerator().manual_seed(seed); }

}  // namespace mixrt

#endif  // MIXRT_CORE_TENSOR_GENERATOR_H_
