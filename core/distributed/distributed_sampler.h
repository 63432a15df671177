// torch.utils.data.DistributedSampler: which dataset indices this rank
// trains on in an epoch. Every rank draws the same permutation (from the
// seed and the epoch, never from a rank's own state) and takes every
// world_size-th index starting at its rank, so the ranks' shards are
// disjoint and together cover the epoch; set_epoch reshuffles. The global
// batch b of a run on N ranks is the same set of indices whatever N is,
// which is what lets a DDP run resume on a different number of ranks.
#ifndef MIXRT_CORE_DISTRIBUTED_DISTRIBUTED_SAMPLER_H_
#define MIXRT_CORE_DISTRIBUTED_DISTRIBUTED_SAMPLER_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"

namespace mixrt::distributed {

struct DistributedSamplerOptions {
  bool shuffle = true;
  uint64_t seed = 0;
  // Without drop_last the epoch is padded with its first indices up to a
  // multiple of world_size (every rank gets as many); with it, the tail
  // that does not divide evenly is dropped.
  bool drop_last = false;
};

class DistributedSampler {
 public:
  static absl::StatusOr<DistributedSampler> Create(
      int64_t dataset_size, int world_size, int rank,
      DistributedSamplerOptions options = {});

  void set_epoch(int64_t epoch) { epoch_ = epoch; }
  int64_t epoch() const { return epoch_; }
  // Indices per rank and epoch.
  int64_t num_samples() const { return num_samples_; }
  // This rank's indices for the current epoch, in training order.
  std::vector<int64_t> indices() const;

 private:
  int64_t size_ = 0;
  int world_size_ = 1;
  int rank_ = 0;
  DistributedSamplerOptions options_;
  int64_t epoch_ = 0;
  int64_t num_samples_ = 0;
};

}  // namespace mixrt::distributed

#endif  // MIXRT_CORE_DISTRIBUTED_DISTRIBUTED_SAMPLER_H_
