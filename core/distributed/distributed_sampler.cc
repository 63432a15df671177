#include "core/distributed/distributed_sampler.h"

#include <numeric>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"

namespace mixrt::distributed {
namespace {

// SplitMix64: the same stream on every machine and standard library
// (std::shuffle's algorithm is left to the implementation).
uint64_t SplitMix64(uint64_t& state) {
  uint64_t z = (state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

}  // namespace

absl::StatusOr<DistributedSampler> DistributedSampler::Create(
    int64_t dataset_size, int world_size, int rank,
    DistributedSamplerOptions options) {
  if (dataset_size < 0 || world_size < 1 || rank < 0 || rank >= world_size) {
    return absl::InvalidArgumentError(absl::StrCat(
        "DistributedSampler: dataset size ", dataset_size, ", world size ",
        world_size, ", rank ", rank,
        "; expected a size >= 0, a world size >= 1 and 0 <= rank < world "
        "size"));
  }
  DistributedSampler s;
  s.size_ = dataset_size;
  s.world_size_ = world_size;
  s.rank_ = rank;
  s.options_ = options;
  s.num_samples_ = options.drop_last
                       ? dataset_size / world_size
                       : (dataset_size + world_size - 1) / world_size;
  return s;
}

std::vector<int64_t> DistributedSampler::indices() const {
  std::vector<int64_t> order(size_);
  std::iota(order.begin(), order.end(), 0);
  if (options_.shuffle) {
    uint64_t state = options_.seed * 0x100000001B3ull + epoch_;
    for (int64_t i = size_ - 1; i > 0; --i) {  // Fisher-Yates.
      const auto j = static_cast<int64_t>(SplitMix64(state) %
                                          static_cast<uint64_t>(i + 1));
      std::swap(order[i], order[j]);
    }
  }
  const int64_t total = num_samples_ * world_size_;
  for (int64_t i = size_; i < total; ++i) order.push_back(order[i - size_]);
  order.resize(total);
  std::vector<int64_t> mine;
  mine.reserve(num_samples_);
  for (int64_t i = rank_; i < total; i += world_size_) mine.push_back(order[i]);
  return mine;
}

}  // namespace mixrt::distributed
