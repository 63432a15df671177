#include "core/kernels/memory_overlap.h"

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <vector>

#include "core/dtype.h"

namespace mixrt::kernels {
namespace {

// Bytes from the storage's start to `t`'s first element, and one past its
// last (strides may be negative in principle; none are here, but the
// range is taken over both ends).
std::pair<int64_t, int64_t> ByteRange(const Tensor& t) {
  const int64_t item = static_cast<int64_t>(DTypeSize(t.dtype()));
  int64_t lo = t.offset(), hi = t.offset();
  for (int i = 0; i < t.ndim(); ++i) {
    const int64_t reach = (t.shape()[i] - 1) * t.strides()[i];
    (reach < 0 ? lo : hi) += reach;
  }
  return {lo * item, (hi + 1) * item};
}

}  // namespace

bool IsNonOverlappingAndDense(const Tensor& t) {
  if (t.is_contiguous()) return true;
  std::vector<int> dims(t.ndim());
  std::iota(dims.begin(), dims.end(), 0);
  // Dims of size 1 place nothing; the rest, by stride, must each step over
  // exactly the dims below them.
  std::sort(dims.begin(), dims.end(),
            [&](int a, int b) { return t.strides()[a] < t.strides()[b]; });
  int64_t expected = 1;
  for (int d : dims) {
    const int64_t size = t.shape()[d];
    if (size == 1) continue;
    if (t.strides()[d] != expected) return false;
    expected *= size;
  }
  return true;
}

bool MayShareElements(const Tensor& a, const Tensor& b) {
  if (a.numel() == 0 || b.numel() == 0 || !a.shares_storage_with(b)) {
    return false;
  }
  const auto [a_begin, a_end] = ByteRange(a);
  const auto [b_begin, b_end] = ByteRange(b);
  return a_begin < b_end && b_begin < a_end;
}

MemoryOverlap OverlapOf(const Tensor& a, const Tensor& b) {
  if (a.is_same(b)) return MemoryOverlap::kFull;
  if (a.numel() == 0 || b.numel() == 0) return MemoryOverlap::kNo;
  if (!IsNonOverlappingAndDense(a) || !IsNonOverlappingAndDense(b)) {
    return MemoryOverlap::kTooHard;
  }
  if (!a.shares_storage_with(b)) return MemoryOverlap::kNo;
  const auto [a_begin, a_end] = ByteRange(a);
  const auto [b_begin, b_end] = ByteRange(b);
  if (a_begin == b_begin && a_end == b_end) {
    return a.strides() == b.strides() ? MemoryOverlap::kFull
                                      : MemoryOverlap::kPartial;
  }
  return a_begin < b_end && b_begin < a_end ? MemoryOverlap::kPartial
                                            : MemoryOverlap::kNo;
}

absl::Status CheckNoInternalOverlap(const Tensor& t) {
  if (IsNonOverlappingAndDense(t)) return absl::OkStatus();
  for (int i = 0; i < t.ndim(); ++i) {
    if (t.shape()[i] > 1 && t.strides()[i] == 0) {
      return absl::FailedPreconditionError(
          "unsupported operation: more than one element of the written-to "
          "tensor refers to a single memory location. Please clone() the "
          "tensor before performing the operation.");
    }
  }
  return absl::OkStatus();
}

absl::Status CheckNoPartialOverlap(const Tensor& dst, const Tensor& src) {
  if (OverlapOf(dst, src) != MemoryOverlap::kPartial) return absl::OkStatus();
  return absl::FailedPreconditionError(
      "unsupported operation: some elements of the input tensor and the "
      "written-to tensor refer to a single memory location. Please clone() "
      "the tensor before performing the operation.");
}

}  // namespace mixrt::kernels
