#include "core/distributed/power_sgd.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "core/kernels/fill_copy.h"
#include "core/kernels/matmul.h"
#include "core/kernels/pointwise.h"
#include "core/tensor/factories.h"
#include "mixrt/status_macros.h"

namespace mixrt::distributed {

void OrthogonalizeColumns(std::vector<float>& matrix, int64_t rows,
                          int64_t cols, double epsilon) {
  std::vector<double> m(matrix.begin(), matrix.end());
  auto at = [&](int64_t r, int64_t c) -> double& { return m[r * cols + c]; };
  auto norm_of = [&](int64_t c) {
    double s = 0;
    for (int64_t r = 0; r < rows; ++r) s += at(r, c) * at(r, c);
    return std::sqrt(s);
  };
  for (int64_t i = 0; i < cols; ++i) {
    const double before = norm_of(i);
    // Projected out of the earlier columns twice ("twice is enough"): a
    // factor of lower rank than its columns (the P of a [32, 32] gradient
    // of rank 16 at rank 32) leaves columns of f32 rounding noise, which
    // the second pass makes orthogonal too, so P P^T stays a projection.
    // PyTorch takes Householder QR for rank > 2 for the same reason.
    for (int pass = 0; pass < 2; ++pass) {
      for (int64_t j = 0; j < i; ++j) {
        double dot = 0;
        for (int64_t r = 0; r < rows; ++r) dot += at(r, j) * at(r, i);
        for (int64_t r = 0; r < rows; ++r) at(r, i) -= dot * at(r, j);
      }
    }
    const double after = norm_of(i);
    // What is left of a column inside the span of the earlier ones is
    // double rounding (a gradient with zero rows confines P to fewer
    // dimensions than its columns): no direction at all, so the column is
    // zero, as is a zero column (where PyTorch divides by zero: NaN). A
    // zero column contributes nothing to P Q^T.
    const double divisor = after + epsilon;
    const bool degenerate = after <= 1e-10 * before || !(divisor > 0);
    const double inverse = degenerate ? 0.0 : 1.0 / divisor;
    for (int64_t r = 0; r < rows; ++r) at(r, i) *= inverse;
  }
  for (size_t k = 0; k < m.size(); ++k) matrix[k] = static_cast<float>(m[k]);
}

absl::StatusOr<std::unique_ptr<PowerSgdHook>> PowerSgdHook::Create(
    PowerSgdOptions options, std::shared_ptr<ProcessGroup> group) {
  if (options.matrix_approximation_rank < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "PowerSGD: matrix_approximation_rank must be at least 1, not ",
        options.matrix_approximation_rank));
  }
  if ((options.use_error_feedback || options.warm_start) &&
      options.start_powerSGD_iter <= 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "PowerSGD: start_powerSGD_iter must be > 1 when use_error_feedback "
        "or warm_start is on (it is ",
        options.start_powerSGD_iter,
        "), because PowerSGD can only be applied after the first two "
        "iterations in DDP"));
  }
  if (!(options.min_compression_rate >= 0) ||
      !(options.orthogonalization_epsilon >= 0)) {
    return absl::InvalidArgumentError(
        "PowerSGD: min_compression_rate and orthogonalization_epsilon must "
        "be >= 0");
  }
  if (group == nullptr) {
    return absl::InvalidArgumentError("PowerSGD: no process group");
  }
  return std::unique_ptr<PowerSgdHook>(
      new PowerSgdHook(options, std::move(group)));
}

PowerSgdHook::BucketState PowerSgdHook::Classify(
    const std::vector<BucketTensor>& layout) const {
  BucketState s;
  for (const BucketTensor& t : layout) {
    int64_t numel = 1;
    for (int64_t d : t.shape) numel *= d;
    s.numel += numel;
    // PyTorch's tensor.view(tensor.shape[0], -1).
    const int64_t rows = t.shape.empty() ? 1 : t.shape[0];
    const int64_t cols = rows > 0 ? numel / rows : 0;
    const int64_t rank =
        std::min<int64_t>({rows, cols, options_.matrix_approximation_rank});
    const bool compress =
        numel > 0 && static_cast<double>((rows + cols) * rank) *
                             options_.min_compression_rate <
                         static_cast<double>(numel);
    if (compress) {
      s.matrices.push_back({t.offset, rows, cols, rank, s.p_numel, s.q_numel});
      s.p_numel += rows * rank;
      s.q_numel += cols * rank;
    } else {
      s.uncompressed.push_back({t.offset, numel});
      s.uncompressed_numel += numel;
    }
  }
  return s;
}

namespace {

// Elements [offset, offset + rows * cols) of a flat tensor as a row-major
// [rows, cols] view.
absl::StatusOr<Tensor> SliceAsMatrix(const Tensor& flat, int64_t offset,
                                     int64_t rows, int64_t cols) {
  MIXRT_ASSIGN_OR_RETURN(Tensor slice,
                         flat.slice(0, offset, offset + rows * cols));
  return slice.view({rows, cols});
}

// The columns of the row-major [rows, cols] factor at `offset` that cannot
// start the next step: all of them when one value is an inf or NaN (a
// skipped step's Q), else the zero ones (a zero column would stay zero for
// good: P = M q = 0, then q = M^T P = 0).
std::vector<int64_t> ColumnsToRedraw(const std::vector<float>& host,
                                     int64_t offset, int64_t rows,
                                     int64_t cols) {
  std::vector<int64_t> redraw;
  for (int64_t c = 0; c < cols; ++c) {
    bool nonzero = false;
    for (int64_t r = 0; r < rows; ++r) {
      const float v = host[offset + r * cols + c];
      if (!std::isfinite(v)) {
        redraw.resize(cols);
        for (int64_t k = 0; k < cols; ++k) redraw[k] = k;
        return redraw;
      }
      nonzero |= v != 0;
    }
    if (!nonzero) redraw.push_back(c);
  }
  return redraw;
}

}  // namespace

absl::StatusOr<PowerSgdHook::MatrixViews> PowerSgdHook::ViewsOf(
    const BucketState& s, const Tensor& gradients, const Matrix& m) const {
  MatrixViews v;
  MIXRT_ASSIGN_OR_RETURN(v.m,
                         SliceAsMatrix(gradients, m.offset, m.rows, m.cols));
  MIXRT_ASSIGN_OR_RETURN(v.p, SliceAsMatrix(s.p, m.p_offset, m.rows, m.rank));
  MIXRT_ASSIGN_OR_RETURN(v.q, SliceAsMatrix(s.q, m.q_offset, m.cols, m.rank));
  return v;
}

absl::Status PowerSgdHook::CopyUncompressed(const BucketState& s,
                                            const Tensor& bucket,
                                            bool into_plain) const {
  int64_t at = 0;
  for (const Uncompressed& u : s.uncompressed) {
    MIXRT_ASSIGN_OR_RETURN(Tensor packed, s.plain.slice(0, at, at + u.numel));
    MIXRT_ASSIGN_OR_RETURN(Tensor place,
                           bucket.slice(0, u.offset, u.offset + u.numel));
    MIXRT_RETURN_IF_ERROR(into_plain ? kernels::copy_(packed, place)
                                     : kernels::copy_(place, packed));
    at += u.numel;
  }
  return absl::OkStatus();
}

absl::StatusOr<bool> PowerSgdHook::OrthogonalizeP(BucketState& s) const {
  MIXRT_ASSIGN_OR_RETURN(std::vector<float> host, s.p.to_float_vector());
  for (float v : host) {
    if (!std::isfinite(v)) return false;
  }
  for (const Matrix& m : s.matrices) {
    OrthogonalizeFactor(host, m.p_offset, m.rows, m.rank);
  }
  MIXRT_RETURN_IF_ERROR(WriteFactors(host, s.p));
  return true;
}

void PowerSgdHook::OrthogonalizeFactor(std::vector<float>& host, int64_t offset,
                                       int64_t rows, int64_t rank) const {
  std::vector<float> factor(host.begin() + offset,
                            host.begin() + offset + rows * rank);
  OrthogonalizeColumns(factor, rows, rank, options_.orthogonalization_epsilon);
  std::copy(factor.begin(), factor.end(), host.begin() + offset);
}

absl::Status PowerSgdHook::WriteFactors(const std::vector<float>& host,
                                        Tensor& memory) const {
  MIXRT_ASSIGN_OR_RETURN(
      Tensor values,
      from_floats(host, {memory.numel()}, DType::kF32, memory.device()));
  return kernels::copy_(memory, values);
}

absl::Status PowerSgdHook::StartQ(BucketState& s, const Device& device) {
  std::vector<float> host;
  if (options_.warm_start && s.q.defined()) {
    MIXRT_ASSIGN_OR_RETURN(host, s.q.to_float_vector());
  } else {
    MIXRT_ASSIGN_OR_RETURN(s.q, empty({s.q_numel}, DType::kF32, device));
    host.assign(s.q_numel, 0.0f);
  }
  for (const Matrix& m : s.matrices) {
    // First use, no warm start, or columns that cannot start (a step that
    // was not finite, a gradient of zeros): random columns, the same on
    // every rank (every rank holds the same Q and makes the same draws).
    const std::vector<int64_t> redraw =
        ColumnsToRedraw(host, m.q_offset, m.cols, m.rank);
    if (!redraw.empty()) {
      MIXRT_ASSIGN_OR_RETURN(
          Tensor draw, randn({static_cast<int64_t>(redraw.size()), m.cols},
                             DType::kF32, device, 0, 1, &generator_));
      MIXRT_ASSIGN_OR_RETURN(std::vector<float> values, draw.to_float_vector());
      for (size_t k = 0; k < redraw.size(); ++k) {
        for (int64_t r = 0; r < m.cols; ++r) {
          host[m.q_offset + r * m.rank + redraw[k]] = values[k * m.cols + r];
        }
      }
    }
    OrthogonalizeFactor(host, m.q_offset, m.cols, m.rank);
  }
  return WriteFactors(host, s.q);
}

absl::Status PowerSgdHook::Launch(int index, const Tensor& flat,
                                  const std::vector<BucketTensor>& layout) {
  if (flat.dtype() != DType::kF32) {
    return absl::InvalidArgumentError(
        "PowerSGD compresses f32 gradient buckets only");
  }
  auto found = buckets_.find(index);
  if (found == buckets_.end()) {
    found = buckets_.emplace(index, Classify(layout)).first;
  }
  BucketState& s = found->second;
  if (s.numel != flat.numel()) {
    return absl::InternalError(absl::StrCat("PowerSGD: bucket ", index, " has ",
                                            flat.numel(),
                                            " elements, its layout ", s.numel));
  }
  const Device device = flat.device();
  // What is compressed: the gradients plus last step's residual (a new
  // tensor, which is also the copy the next residual is taken from), or
  // the gradients themselves. `flat` receives the results in Finish.
  if (options_.use_error_feedback && s.error.defined()) {
    MIXRT_ASSIGN_OR_RETURN(s.input, kernels::add(flat, s.error));
  } else if (options_.use_error_feedback) {
    MIXRT_ASSIGN_OR_RETURN(s.input, flat.clone());
  } else {
    s.input = flat;
  }
  if (s.uncompressed_numel > 0) {
    if (!s.plain.defined()) {
      MIXRT_ASSIGN_OR_RETURN(
          s.plain, empty({s.uncompressed_numel}, DType::kF32, device));
    }
    MIXRT_RETURN_IF_ERROR(CopyUncompressed(s, s.input, /*into_plain=*/true));
    MIXRT_ASSIGN_OR_RETURN(s.plain_work,
                           group_->AllReduce(s.plain, ReduceOp::kAvg));
  }
  if (!s.matrices.empty()) {
    MIXRT_RETURN_IF_ERROR(StartQ(s, device));
    if (!s.p.defined()) {
      MIXRT_ASSIGN_OR_RETURN(s.p, empty({s.p_numel}, DType::kF32, device));
    }
    for (const Matrix& m : s.matrices) {
      MIXRT_ASSIGN_OR_RETURN(MatrixViews v, ViewsOf(s, s.input, m));
      MIXRT_ASSIGN_OR_RETURN(Tensor product, kernels::matmul(v.m, v.q));
      MIXRT_RETURN_IF_ERROR(kernels::copy_(v.p, product));
    }
    // Summed, not averaged: P is orthogonalized next, which undoes any
    // scale.
    MIXRT_ASSIGN_OR_RETURN(s.p_work, group_->AllReduce(s.p, ReduceOp::kSum));
  }
  s.launched = true;
  return absl::OkStatus();
}

absl::Status PowerSgdHook::PoisonCompressed(const BucketState& s,
                                            const Tensor& flat) const {
  for (const Matrix& m : s.matrices) {
    MIXRT_ASSIGN_OR_RETURN(Tensor matrix,
                           SliceAsMatrix(flat, m.offset, m.rows, m.cols));
    MIXRT_RETURN_IF_ERROR(
        kernels::fill_(matrix, std::numeric_limits<double>::quiet_NaN()));
  }
  return absl::OkStatus();
}

absl::Status PowerSgdHook::Finish(int index, const Tensor& flat) {
  auto found = buckets_.find(index);
  if (found == buckets_.end() || !found->second.launched) {
    return absl::InternalError(
        absl::StrCat("PowerSGD: bucket ", index, " finished unlaunched"));
  }
  BucketState& s = found->second;
  s.launched = false;
  if (s.uncompressed_numel > 0) {
    MIXRT_RETURN_IF_ERROR(s.plain_work.Wait());
    MIXRT_RETURN_IF_ERROR(CopyUncompressed(s, flat, /*into_plain=*/false));
  }
  bool finite = true;
  if (!s.matrices.empty()) {
    MIXRT_RETURN_IF_ERROR(s.p_work.Wait());
    // Every rank holds the same all-reduced P and Q, so every rank takes
    // the same branch below (and the Q all-reduce stays matched).
    MIXRT_ASSIGN_OR_RETURN(finite, OrthogonalizeP(s));
    if (finite) {
      for (const Matrix& m : s.matrices) {
        MIXRT_ASSIGN_OR_RETURN(MatrixViews v, ViewsOf(s, s.input, m));
        MIXRT_ASSIGN_OR_RETURN(Tensor transposed, v.m.transpose(0, 1));
        MIXRT_ASSIGN_OR_RETURN(Tensor product,
                               kernels::matmul(transposed, v.p));
        MIXRT_RETURN_IF_ERROR(kernels::copy_(v.q, product));
      }
      MIXRT_ASSIGN_OR_RETURN(Work q_work,
                             group_->AllReduce(s.q, ReduceOp::kAvg));
      MIXRT_RETURN_IF_ERROR(q_work.Wait());
      MIXRT_ASSIGN_OR_RETURN(std::vector<float> q_host, s.q.to_float_vector());
      finite = std::all_of(q_host.begin(), q_host.end(),
                           [](float v) { return std::isfinite(v); });
    }
    if (!finite) {
      // The step will be skipped: NaN everywhere it was compressed, and
      // the residual and Q are not taken from it. A Q that is not finite
      // is drawn afresh next time (StartQ).
      MIXRT_RETURN_IF_ERROR(PoisonCompressed(s, flat));
      s.input = Tensor();
      return absl::OkStatus();
    }
    for (const Matrix& m : s.matrices) {
      MIXRT_ASSIGN_OR_RETURN(MatrixViews v, ViewsOf(s, flat, m));
      MIXRT_ASSIGN_OR_RETURN(Tensor q_t, v.q.transpose(0, 1));
      MIXRT_ASSIGN_OR_RETURN(Tensor approximation, kernels::matmul(v.p, q_t));
      MIXRT_RETURN_IF_ERROR(kernels::copy_(v.m, approximation));
    }
  }
  if (options_.use_error_feedback) {
    MIXRT_ASSIGN_OR_RETURN(s.error, kernels::sub(s.input, flat));
  }
  s.input = Tensor();
  if (!options_.warm_start) s.q = Tensor();
  return absl::OkStatus();
}

void PowerSgdHook::Abandon() {
  for (auto& [index, s] : buckets_) {
    s.plain_work.Wait().IgnoreError();
    s.p_work.Wait().IgnoreError();
    s.launched = false;
    s.input = Tensor();
  }
}

int64_t PowerSgdHook::wire_bytes(int index) const {
  auto found = buckets_.find(index);
  if (found == buckets_.end()) return 0;
  return 4 * found->second.wire_numel();
}

int64_t PowerSgdHook::numel_before_compression() const {
  int64_t n = 0;
  for (const auto& [index, s] : buckets_) n += s.numel;
  return n;
}

int64_t PowerSgdHook::numel_after_compression() const {
  int64_t n = 0;
  for (const auto& [index, s] : buckets_) n += s.wire_numel();
  return n;
}

}  // namespace mixrt::distributed
