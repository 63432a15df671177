// PyTorch's PowerSGD communication hook
// (torch.distributed.algorithms.ddp_comm_hooks.powerSGD_hook, Vogels et
// al. 2019) for DistributedDataParallel's f32 buckets: each gradient
// matrix M [n, m] (a tensor viewed as [shape[0], rest]) travels as two
// low-rank factors, P = M Q [n, r] and Q = M^T P [m, r], summed across
// ranks, and the rank's gradient becomes P Q^T / world_size:
//   1. error feedback: last step's residual is added to the bucket;
//   2. tensors whose factors would not save min_compression_rate times
//      their size (vectors, small matrices) are all-reduced as they are;
//   3. P = M Q (Q from the last step, re-orthogonalized: warm start; random
//      the first time), all-reduced, orthogonalized (Gram-Schmidt);
//   4. Q = M^T P, all-reduced and divided by the world size;
//   5. M = P Q^T, and the residual (what went in minus what came out) is
//      kept for the next step.
// The first start_powerSGD_iter backwards all-reduce the buckets plainly.
//
// Every rank ends with the same gradients (the factors are all-reduced, so
// every rank multiplies the same numbers). An inf or NaN in any rank's
// gradient reaches every rank's P or Q, and then every compressed gradient
// of that bucket becomes NaN on every rank, so every GradScaler skips the
// step. Unlike PyTorch, that step leaves the residual and the warm-start
// Q as they were: a NaN kept there would poison every later step. Also
// unlike PyTorch, a zero column of P (a gradient of zeros) is left zero
// where PyTorch's orthogonalization divides by zero (NaN).
#ifndef MIXRT_CORE_DISTRIBUTED_POWER_SGD_H_
#define MIXRT_CORE_DISTRIBUTED_POWER_SGD_H_

#include <map>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "core/distributed/process_group.h"
#include "core/tensor/generator.h"
#include "core/tensor/tensor.h"

namespace mixrt::distributed {

// PyTorch's PowerSGDState hyperparameters, with its defaults.
struct PowerSgdOptions {
  // r: the factors' columns. Higher is closer to the gradient and costs
  // (n + m) r floats per matrix on the wire.
  int matrix_approximation_rank = 1;
  // Backwards that all-reduce plainly before PowerSGD starts (> 1 with
  // error feedback or warm start, as PyTorch requires).
  int64_t start_powerSGD_iter = 1000;
  // A matrix is compressed only when (n + m) r * this < n m.
  double min_compression_rate = 2;
  bool use_error_feedback = true;
  // Q kept from one step to the next (one power iteration per step).
  bool warm_start = true;
  // Added to each column's norm before the division.
  double orthogonalization_epsilon = 0;
  // Seeds Q's random starts, the same on every rank.
  uint64_t random_seed = 0;
};

// Where each gradient of a bucket sits in its flat tensor.
struct BucketTensor {
  int64_t offset = 0;
  std::vector<int64_t> shape;
};

class PowerSgdHook {
 public:
  static absl::StatusOr<std::unique_ptr<PowerSgdHook>> Create(
      PowerSgdOptions options, std::shared_ptr<ProcessGroup> group);

  // True while backwards all-reduce plainly (before start_powerSGD_iter).
  bool vanilla() const { return iter_ < options_.start_powerSGD_iter; }
  int64_t iter() const { return iter_; }

  // When bucket `index` (its f32 flat tensor and layout) is complete:
  // error feedback, the uncompressed tensors' all-reduce, P and its
  // all-reduce, started.
  absl::Status Launch(int index, const Tensor& flat,
                      const std::vector<BucketTensor>& layout);
  // At the end of backward, per launched bucket: waits, orthogonalizes P,
  // all-reduces Q and writes the approximated gradients into `flat`.
  absl::Status Finish(int index, const Tensor& flat);
  // After every bucket's Finish: one backward done.
  void EndBackward() { ++iter_; }
  // Waits for whatever a failed backward left in flight.
  void Abandon();

  // Bytes on the wire for bucket `index` per step (uncompressed tensors
  // plus both factors).
  int64_t wire_bytes(int index) const;
  // Elements before and after compression over every bucket, as PyTorch's
  // compression stats.
  int64_t numel_before_compression() const;
  int64_t numel_after_compression() const;

 private:
  struct Matrix {
    int64_t offset, rows, cols, rank;
    int64_t p_offset, q_offset;  // In the bucket's P and Q memory.
  };
  struct Uncompressed {
    int64_t offset, numel;
  };
  struct BucketState {
    std::vector<Matrix> matrices;
    std::vector<Uncompressed> uncompressed;
    int64_t numel = 0, p_numel = 0, q_numel = 0, uncompressed_numel = 0;
    Tensor error;  // Last step's residual (error feedback).
    Tensor input;  // This step's gradient plus the residual.
    Tensor p, q;   // The factors, flat; q persists (warm start).
    Tensor plain;  // The uncompressed tensors, packed.
    Work plain_work, p_work;
    bool launched = false;
    // Floats on the wire per step: the uncompressed tensors and the factors.
    int64_t wire_numel() const {
      return uncompressed_numel + p_numel + q_numel;
    }
  };
  // One compressed matrix of a bucket as views: M (of the gradients given)
  // and its P and Q factors.
  struct MatrixViews {
    Tensor m, p, q;
  };

  PowerSgdHook(PowerSgdOptions options, std::shared_ptr<ProcessGroup> group)
      : options_(options),
        group_(std::move(group)),
        generator_(options.random_seed) {}
  BucketState Classify(const std::vector<BucketTensor>& layout) const;
  absl::Status StartQ(BucketState& s, const Device& device);
  absl::StatusOr<MatrixViews> ViewsOf(const BucketState& s,
                                      const Tensor& gradients,
                                      const Matrix& m) const;
  // The uncompressed tensors between their places in `bucket` and the
  // packed all-reduce buffer (into it, or back out).
  absl::Status CopyUncompressed(const BucketState& s, const Tensor& bucket,
                                bool into_plain) const;
  // Orthogonalizes each matrix's P on the host; false when P holds an inf
  // or NaN.
  absl::StatusOr<bool> OrthogonalizeP(BucketState& s) const;
  void OrthogonalizeFactor(std::vector<float>& host, int64_t offset,
                           int64_t rows, int64_t rank) const;
  absl::Status WriteFactors(const std::vector<float>& host,
                            Tensor& memory) const;
  absl::Status PoisonCompressed(const BucketState& s, const Tensor& flat) const;

  PowerSgdOptions options_;
  std::shared_ptr<ProcessGroup> group_;
  Generator generator_;
  int64_t iter_ = 0;
  std::map<int, BucketState> buckets_;
};

// Gram-Schmidt on the columns of a row-major [rows, cols] matrix, as
// PyTorch's _orthogonalize_gram_schmidt, in double here: each column has
// the earlier ones projected out of it (twice), then is divided by its
// norm plus epsilon. A column that is zero, or whose remainder is only
// rounding of the earlier ones' span, becomes zeros.
void OrthogonalizeColumns(std::vector<float>& matrix, int64_t rows,
                          int64_t cols, double epsilon);

}  // namespace mixrt::distributed

#endif  // MIXRT_CORE_DISTRIBUTED_POWER_SGD_H_
